#!/usr/bin/env bash
# Builds the first-party Wasm provider modules. Filled in with the modules.
set -euo pipefail
