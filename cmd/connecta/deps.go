// Blank imports that pin the chosen dependencies until real code imports them; delete when every one is used.
package main

import (
	_ "github.com/elastic/go-seccomp-bpf"
	_ "github.com/lmittmann/tint"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/tetratelabs/wazero"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sys/unix"
)
