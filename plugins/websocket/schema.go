package websocket

// configSchema is the JSON Schema (2020-12) of an operation's websocket
// config, reported by Describe. ValidateOperation is stricter (it checks
// templates, JSONPaths, header names and TLS files too).
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "websocket operation config",
  "type": "object",
  "additionalProperties": false,
  "required": ["url"],
  "$defs": {
    "message": {"description": "A JSON value sent as JSON text, or a string sent as plain text; strings may hold {{argument}} variables and {{cursor}}."},
    "messages": {"description": "One message, or a list of messages sent in order.", "anyOf": [{"$ref": "#/$defs/message"}, {"type": "array", "items": {"$ref": "#/$defs/message"}}]},
    "ms": {"type": "integer", "minimum": 0, "maximum": 600000}
  },
  "properties": {
    "url": {"description": "ws:// or wss:// URL; {{name}} in the path and query is filled from the tool argument of that name. The host is literal.", "type": "string"},
    "subprotocols": {"description": "Subprotocols offered in the handshake; the upstream must pick one.", "type": "array", "items": {"type": "string"}},
    "headers": {"description": "Static handshake headers (secrets via placeholders).", "type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
    "tls": {"type": "object", "additionalProperties": false, "properties": {
      "ca_file": {"type": "string"}, "cert_file": {"type": "string"}, "key_file": {"type": "string"}, "server_name": {"type": "string"}}},
    "compression": {"description": "permessage-deflate offered to the upstream; it decides.", "enum": ["disabled", "no_context_takeover", "context_takeover"], "default": "disabled"},
    "max_message_bytes": {"description": "Largest message read; a larger one is skipped and reported as a gap.", "type": "integer", "minimum": 64, "maximum": 33554432, "default": 1048576},
    "subscribe": {"$ref": "#/$defs/messages"},
    "unsubscribe": {"$ref": "#/$defs/messages"},
    "ack": {"type": "object", "additionalProperties": false, "required": ["path"], "properties": {
      "path": {"description": "JSONPath of the acknowledgement's value.", "type": "string"},
      "equals": {"$ref": "#/$defs/message"},
      "timeout_ms": {"$ref": "#/$defs/ms", "default": 5000}}},
    "filter": {"description": "RFC 9535 filter expression on the message as @; messages it rejects are not items.", "type": "string"},
    "id_path": {"description": "JSONPath of an item's id, also the stream's cursor ({{cursor}}).", "type": "string"},
    "binary": {"enum": ["refuse", "base64", "text", "skip"], "default": "refuse"},
    "heartbeat": {"type": "object", "additionalProperties": false, "properties": {
      "ping_interval_ms": {"$ref": "#/$defs/ms", "default": 15000},
      "pong_timeout_ms": {"$ref": "#/$defs/ms", "default": 5000},
      "message": {"$ref": "#/$defs/message"}}},
    "reconnect": {"type": "object", "additionalProperties": false, "properties": {
      "max_attempts": {"type": "integer", "minimum": 0, "maximum": 100, "default": 5},
      "initial_delay_ms": {"$ref": "#/$defs/ms", "default": 250},
      "max_delay_ms": {"$ref": "#/$defs/ms", "default": 5000}}},
    "close_timeout_ms": {"$ref": "#/$defs/ms", "default": 2000}
  }
}`
