package view

// Pager cuts a long list into pages: a page of 1,000 nodes or 3,000 workloads helps nobody,
// and renders too slowly for a live page (the benchmarks' budget is 50 ms).
type Pager struct {
	// Page is the page shown, from 1; Pages how many there are.
	Page, Pages int
	// Total counts the items; From and To number the first and last shown, from 1.
	Total, From, To int
}

// Paginate returns page (from 1; clamped) of items, per items a page.
func Paginate[T any](items []T, page, per int) ([]T, Pager) {
	p := Pager{Total: len(items), Pages: max((len(items)+per-1)/per, 1)}
	p.Page = min(max(page, 1), p.Pages)
	from := (p.Page - 1) * per
	to := min(from+per, len(items))
	if from >= to {
		return nil, p
	}
	p.From, p.To = from+1, to
	return items[from:to], p
}
