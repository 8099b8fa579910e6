package stats

import "math"

// WhatIfInput are the inputs of the DS-Analyzer what-if model.
type WhatIfInput struct {
	// DatasetBytes is D, the bytes read per epoch.
	DatasetBytes int64 `json:"dataset_bytes"`
	// CacheBytes is the current cache budget (the first row).
	CacheBytes int64 `json:"cache_bytes"`
	// CacheRate is C, bytes/s delivered from the cache tiers: cached bytes
	// over the wall time no reader waited for data, in the epochs kept that
	// read from a cache tier (a lower bound when the consumer, not the
	// cache, set the pace). 0: not measured; the cache term then counts as
	// free.
	CacheRate float64 `json:"cache_rate"`
	// BackendRate is S, bytes/s of backend fills: bytes served from the
	// backend over the wall time some reader waited for it (the union of
	// the waits, so concurrent fetches count once; parts of a fetched item
	// served later without a wait count as bytes). 0: not measured.
	BackendRate float64 `json:"backend_rate"`
	// ConsumerRate is R, bytes/s the reader consumes when it does not wait:
	// the last complete epoch's bytes over its wall time minus the time some
	// reader waited. 0: unknown.
	ConsumerRate float64 `json:"consumer_rate"`
	// Budgets are further cache budgets in bytes to predict for.
	Budgets []int64 `json:"budgets,omitempty"`
}

// WhatIfRow is the prediction for one cache budget.
type WhatIfRow struct {
	CacheBytes int64   `json:"cache_bytes"`
	Fraction   float64 `json:"fraction"`
	// FetchSeconds is T = D*x/C + D*(1-x)/S.
	FetchSeconds float64 `json:"fetch_seconds"`
	// ConsumeSeconds is D/R (0 when R is unknown).
	ConsumeSeconds float64 `json:"consume_seconds"`
	// StallSeconds is max(0, T - D/R): the fetch stall per epoch.
	StallSeconds float64 `json:"stall_seconds"`
}

// WhatIfResult is the what-if's prediction.
type WhatIfResult struct {
	Inputs WhatIfInput `json:"inputs"`
	// Valid is false when D or S is unknown; Rows is then empty.
	Valid bool        `json:"valid"`
	Rows  []WhatIfRow `json:"rows"`
	// StallFreeKnown is true when R is known and the stall-free size was computed.
	StallFreeKnown bool `json:"stall_free_known"`
	// StallFreeReachable is false when even a full cache fetches slower than R.
	StallFreeReachable bool `json:"stall_free_reachable"`
	// StallFreeFraction and StallFreeBytes are the smallest cache at which
	// T <= D/R.
	StallFreeFraction float64 `json:"stall_free_fraction"`
	StallFreeBytes    int64   `json:"stall_free_bytes"`
}

// WhatIf predicts the fetch time per epoch for the current cache budget
// and for in.Budgets, with the DS-Analyzer model: a cache holding fraction
// x of dataset D serves D*x at rate C and the rest from the backend at
// rate S, T = D*x/C + D*(1-x)/S; the stall disappears when T <= D/R.
func WhatIf(in WhatIfInput) WhatIfResult {
	res := WhatIfResult{Inputs: in, Rows: []WhatIfRow{}}
	D := float64(in.DatasetBytes)
	if D <= 0 || in.BackendRate <= 0 {
		return res
	}
	res.Valid = true
	for _, b := range append([]int64{in.CacheBytes}, in.Budgets...) {
		x := math.Min(math.Max(float64(b)/D, 0), 1)
		row := WhatIfRow{CacheBytes: b, Fraction: x, FetchSeconds: fetchTime(in, x)}
		if in.ConsumerRate > 0 {
			row.ConsumeSeconds = D / in.ConsumerRate
			row.StallSeconds = math.Max(0, row.FetchSeconds-row.ConsumeSeconds)
		}
		res.Rows = append(res.Rows, row)
	}
	if in.ConsumerRate <= 0 {
		return res
	}
	res.StallFreeKnown = true
	// x/C + (1-x)/S <= 1/R  <=>  x*(1/S - 1/C) >= 1/S - 1/R.
	invC := 0.0
	if in.CacheRate > 0 {
		invC = 1 / in.CacheRate
	}
	need, gain := 1/in.BackendRate-1/in.ConsumerRate, 1/in.BackendRate-invC
	switch {
	case need <= 0:
		res.StallFreeReachable = true // the backend alone keeps up
	case gain <= 0 || need > gain:
		res.StallFreeReachable = false
		return res
	default:
		res.StallFreeReachable = true
		res.StallFreeFraction = need / gain
	}
	res.StallFreeBytes = int64(math.Ceil(res.StallFreeFraction * D))
	return res
}

// fetchTime is T(x) in seconds.
func fetchTime(in WhatIfInput, x float64) float64 {
	D := float64(in.DatasetBytes)
	t := D * (1 - x) / in.BackendRate
	if in.CacheRate > 0 {
		t += D * x / in.CacheRate
	}
	return t
}
