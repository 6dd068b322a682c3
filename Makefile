# connecta — build, test, engine build.
GO ?= go

.PHONY: build test test-long wasm wasm-verify bench vet fmt

build:
	$(GO) build -o bin/connecta ./cmd/connecta
	$(GO) build -o bin/sandbox-child ./cmd/sandbox-child

test:
	$(GO) vet ./...
	$(GO) test -short ./...

test-long:
	$(GO) test ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 200x ./...

# wasm / wasm-verify: see quickjs.wasm/ (owned by the engine build).
