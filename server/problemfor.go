package server

// ProblemFor is the problem the API answers err with, from the one table
// of codes, so that another face (wsctl --json) reports an error as the
// API does. An error outside the known set is internal with err's text as
// its detail: the caller decides whether that text may be shown.
func ProblemFor(err error) *Problem {
	if p, ok := problemOf(err); ok {
		return p
	}
	return newProblem(CodeInternal, err.Error())
}
