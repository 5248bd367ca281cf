package bench

import "github.com/stratadb/strata/blob"

// The fleet mode's cost model: what a run's requests and rows would cost
// on S3 Standard at its list prices (us-east-1, as of 2026), for a month
// at the run's rate. Requests are billed by kind: writes (PUT, COPY, POST)
// and LISTs at one price, reads (GET, HEAD) at another, DELETEs free.
const (
	s3WritePer1000      = 0.005  // USD per 1,000 PUT, COPY, POST or LIST requests
	s3ReadPer1000       = 0.0004 // USD per 1,000 GET or HEAD requests
	s3StoragePerGBMonth = 0.023  // USD per GB-month, the first 50 TB
	minutesPerMonth     = 730 * 60
)

// cost is the cost model of a run of the given length (minutes) by the
// given number of writers: requests per shard-minute by kind, and the
// monthly cost of the run's requests and of storing a month of its rows
// (bytes, as the table holds them at the end).
func cost(st blob.Stats, writers int, minutes float64, bytes int64) Result {
	perShardMin := func(n int64) float64 { return perShardMinute(n, writers, minutes) }
	writes := st.Puts + st.CondPutsWon + st.CondPutsLost + st.CondPutsErr
	reads := st.Gets + st.RangeGets + st.Heads
	perMonth := minutesPerMonth / minutes
	requestsUSD := (float64(writes+st.Lists)*s3WritePer1000 + float64(reads)*s3ReadPer1000) / 1000 * perMonth
	storageUSD := float64(bytes) * perMonth / 1e9 * s3StoragePerGBMonth
	return Result{
		"requests_per_shard_min":        perShardMin(st.Requests()),
		"requests_per_shard_min_put":    perShardMin(writes),
		"requests_per_shard_min_get":    perShardMin(reads),
		"requests_per_shard_min_list":   perShardMin(st.Lists),
		"requests_per_shard_min_delete": perShardMin(st.Deletes),
		"s3_usd_per_month_requests":     round(requestsUSD),
		"s3_usd_per_month_storage":      round(storageUSD),
	}
}

// perShardMinute is n requests of a run of the given length (minutes) by
// the given number of writers, per shard and minute.
func perShardMinute(n int64, writers int, minutes float64) float64 {
	return round(float64(n) / float64(writers) / minutes)
}
