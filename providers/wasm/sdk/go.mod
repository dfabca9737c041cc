module github.com/canvasapp/companion/providers/wasm/sdk

go 1.24.0
