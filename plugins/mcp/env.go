package mcp

import (
	"os"
	"strconv"
)

var osEnviron = os.Environ

func itoa(i int) string { return strconv.Itoa(i) }
