package render

// Identities returns the identities the manager that o renders makes requests as, with
// the rules each is granted and the code path of each: what a least-privilege audit
// compares the requests it saw with.
func Identities(o Options) ([]Identity, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	return r.identities(), nil
}
