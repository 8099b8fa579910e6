package prefetch

// Stats is a snapshot of a Prefetcher.
type Stats struct {
	// InFlight Warm calls, across readers.
	InFlight int `json:"in_flight"`
	// Dropped counts observations lost because the queue was full.
	Dropped int64 `json:"dropped"`
	// Readers has one entry per reader followed (one unless several ranks
	// share the mount).
	Readers []ReaderStats `json:"readers"`
}

// ReaderStats is the state of one followed reader.
type ReaderStats struct {
	Name string `json:"name,omitempty"`
	// Epoch is the epoch the reader is in; Position its position there
	// (lowest predicted item not yet read) out of EpochLen.
	Epoch    int `json:"epoch"`
	Position int `json:"position"`
	EpochLen int `json:"epoch_len"`
	// Lead is how many items the prefetcher has issued ahead of the
	// reader; LeadBytes their bytes not yet read (when sizes are known).
	Lead      int   `json:"lead"`
	LeadBytes int64 `json:"lead_bytes"`
	InFlight  int   `json:"in_flight"`
	// Disabled is set when the reads stopped matching the prediction;
	// DisabledReason says why. SetOrder or PushList re-enables.
	Disabled       bool   `json:"disabled"`
	DisabledReason string `json:"disabled_reason,omitempty"`
	// Waiting names what prefetching waits for (an order for an epoch).
	Waiting string `json:"waiting,omitempty"`
	// RepeatsEpoch is set when the job reads the same order every epoch
	// (a DistributedSampler without set_epoch); it is the epoch whose
	// order repeats.
	RepeatsEpoch *int `json:"repeats_epoch,omitempty"`
	// Epochs are per-epoch counters, oldest first (the last KeepEpochs).
	Epochs []EpochStats `json:"epochs"`
}

// EpochStats counts one epoch of reads and prefetches.
type EpochStats struct {
	Epoch int `json:"epoch"`
	// Predicted is the length of the epoch's predicted order.
	Predicted int `json:"predicted"`
	// Observed reads of dataset files; Matched of them were where the
	// prediction put them (within the window), Unmatched were not;
	// Repeated were files read again; Foreign reads were of files outside
	// the layout (not counted in Observed).
	Observed  int64 `json:"observed"`
	Matched   int64 `json:"matched"`
	Unmatched int64 `json:"unmatched"`
	Repeated  int64 `json:"repeated"`
	Foreign   int64 `json:"foreign"`
	// Skipped predicted items were passed without being observed.
	Skipped int64 `json:"skipped"`
	// Issued Warm calls; Fetched of them needed a backend fetch (misses),
	// Errors failed.
	Issued  int64 `json:"issued"`
	Fetched int64 `json:"fetched"`
	Errors  int64 `json:"errors"`
	// Hidden misses were fetched before the reader asked; Late misses were
	// still being fetched when it asked (the reader waited on the same
	// fetch, for less time); NotIssued reads came before the prefetcher
	// got to them; Cached reads were warmed and found already cached.
	Hidden    int64 `json:"hidden"`
	Late      int64 `json:"late"`
	NotIssued int64 `json:"not_issued"`
	Cached    int64 `json:"cached"`
	// MaxLead is the furthest (in items) the prefetcher ran ahead.
	MaxLead int `json:"max_lead"`
	// MatchRate is Matched / Observed; HiddenRate is the share of
	// prefetched misses the reader never waited for, Hidden / (Hidden +
	// Late). Both are 1 when there is nothing to count.
	MatchRate  float64 `json:"match_rate"`
	HiddenRate float64 `json:"hidden_rate"`
}

// rates fills MatchRate and HiddenRate.
func (s *EpochStats) rates() {
	s.MatchRate, s.HiddenRate = 1, 1
	if s.Observed > 0 {
		s.MatchRate = float64(s.Matched) / float64(s.Observed)
	}
	if s.Hidden+s.Late > 0 {
		s.HiddenRate = float64(s.Hidden) / float64(s.Hidden+s.Late)
	}
}
