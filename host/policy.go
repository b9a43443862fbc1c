package host

// OperationOf returns the operation a published tool belongs to, as
// policies judge it: the tool's own operation, or, for a tool of a
// session or async_job family ({name}_start, _poll, _status, …), the
// family's operation, whose Name is the operation's. ok is false for a
// tool the host does not serve.
func (h *Host) OperationOf(tool string) (op *Operation, ok bool) {
	b, ok := h.op(tool)
	if !ok {
		return nil, false
	}
	if b.base != nil {
		return b.base.Operation, true
	}
	return b.Operation, true
}

// CarriesArguments reports whether the tool's arguments are its
// operation's (a unary or window tool, a family's start tool), as
// opposed to a family tool's own (a session or job id).
func (h *Host) CarriesArguments(tool string) bool {
	b, ok := h.op(tool)
	return ok && (b.Role == "" || b.Role == RoleStart)
}
