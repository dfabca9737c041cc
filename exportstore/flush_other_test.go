//go:build !unix

package exportstore

func flushDisk() {}
