package rest

// configSchema is the JSON Schema (2020-12) of an operation's rest config,
// reported by Describe. ValidateOperation is stricter (it also checks URL
// templates, header names and durations).
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "rest operation config",
  "type": "object",
  "additionalProperties": false,
  "oneOf": [
    {"required": ["method", "url"], "not": {"required": ["openapi"]}},
    {"required": ["openapi"], "maxProperties": 1}
  ],
  "properties": {
    "method": {
      "description": "HTTP method (case-insensitive).",
      "type": "string",
      "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS",
               "get", "head", "post", "put", "patch", "delete", "options"]
    },
    "url": {
      "description": "Absolute http or https URL; {name} path segments are filled from the tool argument of that name.",
      "type": "string",
      "format": "uri-template"
    },
    "query": {
      "description": "Tool arguments sent as query parameters: a list of argument names, or an object {query_name: argument_name}.",
      "oneOf": [
        {"type": "array", "items": {"type": "string"}},
        {"type": "object", "additionalProperties": {"type": "string"}}
      ]
    },
    "headers": {
      "description": "Static request headers.",
      "type": "object",
      "additionalProperties": {"type": ["string", "number", "boolean"]}
    },
    "header_args": {
      "description": "Request headers filled from tool arguments: {Header-Name: argument_name}.",
      "type": "object",
      "additionalProperties": {"type": "string"}
    },
    "body": {
      "description": "auto (POST/PUT/PATCH send the remaining arguments), none, arguments (always send the remaining arguments), or an argument name (send that argument's value).",
      "type": "string",
      "default": "auto"
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
    "body_fields": {
      "description": "JSON fields set in every request body object, over the arguments (e.g. {\"stream\": true, \"model\": \"llama3\"}).",
      "type": "object"
    },
    "cursor_param": {
      "description": "Query parameter that carries a window's cursor (mode window): the previous poll's cursor_path value, or the last SSE event id.",
      "type": "string"
    },
    "stream": {
      "description": "How a server_stream window reads the answer (text/event-stream, or one JSON document).",
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "reconnect": {"description": "Reopen a dropped stream with Last-Event-ID; default true for GET, false otherwise.", "type": "boolean"},
        "max_event_bytes": {"description": "Largest SSE event read; larger ones are skipped and reported as a gap.", "type": "integer", "minimum": 1024, "maximum": 33554432, "default": 1048576},
        "events": {"description": "SSE event types to keep (message = events without a type); default all.", "type": "array", "items": {"type": "string"}},
        "end_data": {"description": "An event whose data is exactly this ends the stream; \"\" disables.", "type": "string", "default": "[DONE]"},
        "max_reconnects": {"description": "Consecutive failed reopenings before the stream fails.", "type": "integer", "minimum": 0, "maximum": 100, "default": 5}
      }
    },
    "param_styles": {
      "description": "OpenAPI style/explode serialization of arguments filling path, query or header_args parameters: {argument: {style, explode, allow_reserved}} (openapi_params.go).",
      "type": "object",
      "additionalProperties": {
        "type": "object",
        "additionalProperties": false,
        "required": ["style"],
        "properties": {
          "style": {"enum": ["simple", "label", "matrix", "form", "spaceDelimited", "pipeDelimited", "deepObject", "json"]},
          "explode": {"type": "boolean"},
          "allow_reserved": {"type": "boolean"}
        }
      }
    },
    "openapi": {
      "description": "Import an OpenAPI document: the entry becomes one tool per operation, each with its own rest config (see doc.go, OpenAPI import). The config's only field.",
      "type": "object",
      "additionalProperties": false,
      "required": ["document"],
      "properties": {
        "document": {"description": "The OpenAPI 2.0, 3.0 or 3.1 document: a file relative to the operations file, or an http(s) URL.", "type": "string"},
        "base_url": {"description": "Base URL of the calls; default: the document's first server.", "type": "string", "format": "uri"},
        "allow_external_refs": {"description": "Follow $refs to other files or URLs.", "type": "boolean", "default": false},
        "tool_prefix": {"description": "Prefix of the derived tool names.", "type": "string", "maxLength": 64},
        "include": {"description": "Keep operations matching every list given.", "$ref": "#/$defs/openapiFilter"},
        "exclude": {"description": "Drop operations matching any list given.", "$ref": "#/$defs/openapiFilter"},
        "overrides": {
          "description": "Per operation (operationId or \"METHOD /path\"): name, title, description, mode, a window's transport_behavior, limits, aggregation and safety (as an operations entry writes them), annotations.",
          "type": "object",
          "additionalProperties": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
              "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"},
              "title": {"type": "string"},
              "description": {"type": "string"},
              "mode": {"enum": ["unary", "window"]},
              "transport_behavior": {"enum": ["server_stream", "request_response"]},
              "limits": {"description": "The window's limits, checked by the host as an entry's.", "type": "object"},
              "aggregation": {"description": "The window's aggregation, checked by the host as an entry's.", "type": "object"},
              "safety": {"description": "The window's safety, checked by the host as an entry's.", "type": "object"},
              "annotations": {
                "type": "object",
                "additionalProperties": false,
                "properties": {"read_only": {"type": "boolean"}, "destructive": {"type": "boolean"}, "idempotent": {"type": "boolean"}, "open_world": {"type": "boolean"}}
              }
            }
          }
        },
        "credentials": {
          "description": "Per security scheme: an API key or token, or {username, password} for http basic.",
          "type": "object",
          "additionalProperties": {
            "oneOf": [
              {"type": "string"},
              {"type": "object", "additionalProperties": false, "properties": {"username": {"type": "string"}, "password": {"type": "string"}}}
            ]
          }
        },
        "headers": {"description": "Static headers of every tool.", "type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
        "timeout": {"description": "Per-call timeout of every tool, a Go duration.", "type": "string"},
        "max_response_bytes": {"description": "Largest answer of every tool.", "type": "integer", "minimum": 0},
        "output_schemas": {"description": "Derive output schemas from the 2xx JSON answers.", "type": "boolean", "default": true}
      }
    }
  },
  "$defs": {
    "openapiFilter": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "tags": {"type": "array", "items": {"type": "string"}},
        "operation_ids": {"description": "Globs (* ? [a-z]).", "type": "array", "items": {"type": "string"}},
        "methods": {"type": "array", "items": {"type": "string"}},
        "paths": {"description": "Path prefixes, matched by whole segments.", "type": "array", "items": {"type": "string"}}
      }
    }
  }
}`
