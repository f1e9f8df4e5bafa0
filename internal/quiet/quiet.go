// Package quiet decides when a store may act on its memo of what its own
// last commit left: predict a Postgres write, or answer SQLite reads from
// memory. Both pay for a check that fails when another store wrote in
// between, so both wait for commits in a row that found the database
// where the store's previous commit left it, and wait longer after each
// failed check.
package quiet

// MaxNeed bounds the quiet commits a Rule waits for.
const MaxNeed = 64

// Rule counts a store's quiet commits and how many it needs: 1, doubling
// (to MaxNeed) with each failed check and halving with each that held, so
// a store whose writes race another's soon stops checking. The zero Rule
// needs one quiet commit. It is not safe for concurrent use: callers hold
// their memo's lock.
type Rule struct{ quiet, need int }

// Ready reports whether enough quiet commits came in a row.
func (r *Rule) Ready() bool { return r.quiet >= max(1, r.need) }

// Commit notes a commit; quiet says whether it found the database where
// the store's previous commit left it.
func (r *Rule) Commit(quiet bool) {
	if quiet {
		r.quiet++
	} else {
		r.quiet = 0
	}
}

// Held notes a check that held.
func (r *Rule) Held() { r.need /= 2 }

// Failed notes a check that failed: the count starts again, and the next
// check waits for twice as many quiet commits.
func (r *Rule) Failed() {
	r.need = min(max(2, 2*r.need), MaxNeed)
	r.quiet = 0
}

// Need is how many quiet commits the next check waits for (at least 1).
func (r *Rule) Need() int { return max(1, r.need) }
