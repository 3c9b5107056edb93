package wordcount

// Occurrences remembers which word occurrences a count task has applied, so that a
// replayed line never counts a word twice (seed 000 §5: at-least-once delivery plus an
// idempotent effect gives an exact result).
//
// An occurrence is named by its position in the input: OccurrenceID(file, byte offset
// of the word). Positions are dense, so they are kept in a bitmap of 8 KiB pages, each
// covering 65,536 input bytes. Pages below the floor are freed: the floor is the
// spout's low watermark (every line before it has been acked, so will never be
// replayed), carried on each line tuple. An occurrence below the floor is a stale copy
// from a failed earlier attempt of a line that has since completed, and so was already
// counted: it is reported as seen.
//
// Memory: one bit per input byte between the low watermark and the newest line the
// task has seen, in 8 KiB pages; with max spout pending P lines in flight that is
// about P × (line length) / 8 bytes, a few KiB for word count on books.
type Occurrences struct {
	pages map[uint64]*page
	floor uint64 // page index below which every page is freed
	last  *page
	lastI uint64
}

const pageShift = 16 // 65,536 occurrence positions (input bytes) per page

type page [1 << pageShift / 64]uint64

// NewOccurrences returns an empty set.
func NewOccurrences() *Occurrences { return &Occurrences{pages: map[uint64]*page{}} }

// Apply records occurrence occ and reports whether it was new. low is the spout's low
// watermark when the line was emitted: no occurrence below it can be new.
func (o *Occurrences) Apply(occ, low uint64) bool {
	if o.Seen(occ, low) {
		return false
	}
	o.Add(occ)
	return true
}

// Seen reports whether occurrence occ was applied already (or lies below the floor),
// after raising the floor to low and freeing the pages below it.
func (o *Occurrences) Seen(occ, low uint64) bool {
	if f := low >> pageShift; f > o.floor {
		for i := range o.pages {
			if i < f {
				delete(o.pages, i)
			}
		}
		o.floor = f
		o.last = nil
	}
	pi := occ >> pageShift
	if pi < o.floor {
		return true
	}
	p := o.page(pi, false)
	if p == nil {
		return false
	}
	bit := occ & (1<<pageShift - 1)
	return p[bit/64]&(1<<(bit%64)) != 0
}

// Add records occurrence occ as applied (call Seen first: it maintains the floor).
func (o *Occurrences) Add(occ uint64) {
	pi := occ >> pageShift
	if pi < o.floor {
		return
	}
	bit := occ & (1<<pageShift - 1)
	o.page(pi, true)[bit/64] |= 1 << (bit % 64)
}

func (o *Occurrences) page(pi uint64, create bool) *page {
	if o.last != nil && o.lastI == pi {
		return o.last
	}
	p := o.pages[pi]
	if p == nil {
		if !create {
			return nil
		}
		p = new(page)
		o.pages[pi] = p
	}
	o.last, o.lastI = p, pi
	return p
}

// Pages is the number of bitmap pages held (8 KiB each).
func (o *Occurrences) Pages() int { return len(o.pages) }

// OccurrenceID names byte offset off of input file number file (up to 2^24 files of up
// to 1 TiB each). IDs grow with (file, offset), so one number orders the whole input.
func OccurrenceID(file int, off int64) uint64 { return uint64(file)<<40 | uint64(off) }
