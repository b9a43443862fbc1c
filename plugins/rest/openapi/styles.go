package openapi

// Parameter styles of OpenAPI 3 (plus "json" for parameters declared with
// content: application/json): the values of a REST config's param_styles.
const (
	StyleSimple         = "simple"
	StyleLabel          = "label"
	StyleMatrix         = "matrix"
	StyleForm           = "form"
	StyleSpaceDelimited = "spaceDelimited"
	StylePipeDelimited  = "pipeDelimited"
	StyleDeepObject     = "deepObject"
	StyleJSON           = "json"
)

// StylesIn are the styles of a parameter by its location: "path",
// "query" or "header".
var StylesIn = map[string][]string{
	"path":   {StyleSimple, StyleLabel, StyleMatrix, StyleJSON},
	"query":  {StyleForm, StyleSpaceDelimited, StylePipeDelimited, StyleDeepObject, StyleJSON},
	"header": {StyleSimple, StyleJSON},
}
