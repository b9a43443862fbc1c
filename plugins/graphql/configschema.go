package graphql

// configSchema is the JSON Schema (2020-12) of an operation's graphql
// config, reported by Describe. ValidateOperation and ExpandOperation are
// stricter (they check the URL, the header names, the document against the
// schema).
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "graphql operation config",
  "type": "object",
  "additionalProperties": false,
  "required": ["endpoint"],
  "properties": {
    "endpoint": {
      "description": "Absolute http or https URL of the GraphQL endpoint (requests are POSTs of JSON).",
      "type": "string",
      "format": "uri"
    },
    "schema": {
      "description": "Path of an SDL file (relative to the operations file). Default: introspect the endpoint at load.",
      "type": "string"
    },
    "document": {
      "description": "Path of a .graphql file of named queries and mutations, one tool each (relative to the operations file).",
      "type": "string"
    },
    "query": {
      "description": "An inline GraphQL document, instead of document.",
      "type": "string"
    },
    "operations": {
      "description": "Serve only these operations of the document.",
      "type": "array",
      "items": {"type": "string"},
      "minItems": 1
    },
    "tool_prefix": {
      "description": "Prefix of the derived tool names.",
      "type": "string",
      "maxLength": 64
    },
    "generate": {
      "description": "Generate a query tool per top-level Query field.",
      "type": "object",
      "additionalProperties": false,
      "required": ["query_fields"],
      "properties": {
        "query_fields": {
          "description": "true for every Query field, or a list of field names.",
          "oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]
        },
        "max_depth": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2}
      }
    },
    "headers": {
      "description": "Static request headers (e.g. Authorization); values may come from placeholders.",
      "type": "object",
      "additionalProperties": {"type": ["string", "number", "boolean"]}
    },
    "timeout": {
      "description": "Per-call timeout as a Go duration; the host's operation timeout wins when set.",
      "type": "string",
      "default": "30s"
    },
    "max_response_bytes": {
      "description": "Largest accepted answer body; 0 means the default.",
      "type": "integer",
      "minimum": 0,
      "default": 8388608
    },
    "include_extensions": {
      "description": "Keep the answer's extensions in results.",
      "type": "boolean",
      "default": false
    },
    "tool": {
      "description": "Derived by the adapter when it expands an entry; never written by hand.",
      "type": "object"
    }
  }
}`
