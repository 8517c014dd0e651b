package venue

// Doc is a whole-market stream's document kind: a stream that delivers
// rows of every market at once, as opposed to a pair's own stream
// (snapshot.Stream). Each has its row type, which Rows carries.
type Doc uint8

// The whole-market streams. A new one takes a constant here, a name in
// docNames, and a field of its row type in Rows with a constructor and a
// reader.
const (
	// DocTickers is the all-market ticker stream: rows of Stat, only the
	// markets that changed.
	DocTickers Doc = iota
	// DocMarks is the all-market mark price stream: rows of Contract,
	// every perpetual once a second.
	DocMarks
	// NumDocs is the number of whole-market streams.
	NumDocs
)

var docNames = [NumDocs]string{DocTickers: "tickers", DocMarks: "marks"}

// String names the stream where operators read it: the kind label of
// its stream metrics and its log keys.
func (d Doc) String() string { return docNames[d] }

// Rows is one delivery of a whole-market stream: its kind and its rows, of
// the kind's row type. It is made only by the kind's constructor, so the
// rows are always of the kind it says; passed by value, it costs no
// allocation. Its slices are lent like a DepthUpdate's: a consumer that
// keeps them past the call copies them.
type Rows struct {
	doc       Doc
	stats     []Stat
	contracts []Contract
}

// TickerRows is a delivery of the all-market ticker stream.
func TickerRows(rows []Stat) Rows { return Rows{doc: DocTickers, stats: rows} }

// MarkRows is a delivery of the all-market mark price stream.
func MarkRows(rows []Contract) Rows { return Rows{doc: DocMarks, contracts: rows} }

// Doc is the stream the rows came from.
func (r Rows) Doc() Doc { return r.doc }

// Stats are the rows of a DocTickers delivery; nil for another kind.
func (r Rows) Stats() []Stat { return r.stats }

// Contracts are the rows of a DocMarks delivery; nil for another kind.
func (r Rows) Contracts() []Contract { return r.contracts }
