package admin

// EndpointView is what a handler's view publishes of the tools it serves
// now (GET /crank/endpoints): each tool under its published name, with
// the host's name it calls, and whether the discovery meta-tools are on.
// The policy still decides per caller which of them each sees.
type EndpointView struct {
	// Discovery is off, beside or only.
	Discovery string     `json:"discovery"`
	Tools     []ViewTool `json:"tools"`
}

// ViewTool is one published tool of a view.
type ViewTool struct {
	Name     string   `json:"name"`
	Tool     string   `json:"tool"` // the name it has in the operations
	Title    string   `json:"title,omitempty"`
	Toolsets []string `json:"toolsets,omitempty"`
}
