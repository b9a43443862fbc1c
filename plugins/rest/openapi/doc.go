// Package openapi is the REST adapter's OpenAPI importer: it checks an
// import entry's openapi block (Prepare), reads the OpenAPI document
// (Swagger 2.0, converted; 3.0; 3.1; 3.2 as far as kin-openapi reads it)
// from a file or an http(s) URL, sets aside the operations whose parts
// are unusable, and turns each operation it selects into a tool with its
// own REST config, 2020-12 input and output schemas, annotations and mode
// (Import). The REST adapter (package rest, whose doc says what an entry
// writes, "OpenAPI import") calls it from ExpandOperation and says what it
// writes tools for (Target): the HTTP client that reads documents, the
// methods it sends, its argument names and its config check.
package openapi
