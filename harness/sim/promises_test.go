package sim

// What package sim promises — its oracles (the package doc) — and what
// pins each. TestCampaign runs every oracle over 300 seeds and must pass;
// TestPlantedDefectsAreFound (go test -tags strata_plant) shows an oracle
// can fail by planting a defect the campaign must find; TestSeedReplays
// pins that a seed replays request for request.
//
//   - Every acknowledged row appears exactly once in a fresh read of its
//     shard: found failing by plant.GCWithoutSafetyAge (and, planted by
//     hand, by a shard's fresh read skipping its memtable's newest entry).
//   - ... and in a fresh read of the whole fleet (walshard.ScanFleet):
//     plant.FleetReadSkipsTheNewestEntry, plant.FleetMergeSkipsAGeneration.
//   - ... and, after a final drain, compaction and GC, in the base table:
//     plant.NamesForgotten (a row twice), plant.MergeForgetsWatermark and
//     plant.BlindRetry (the final recovery fails).
//   - A row a Delete removed never appears at or after the delete's
//     version: plant.RewriteOverDelete.
//   - A follower's changes replay the table, once each, in version order,
//     none from a compaction: plant.ChangesRepeatDeletes.
//   - No read sees an upserted key twice, and each key ends with its last
//     acknowledged write's value: plant.UpsertIgnoresLandedKeys.
//   - Seeds that found a defect once pass: TestSeedsThatFoundDefects.
//   - Rows refused to a fenced writer never appear; no row nobody wrote;
//     each row reads back with its value and blob; a pinned version never
//     changes and a tagged one stays readable; no manifest is overwritten
//     and no deleted version comes back; a Rewrite conserves rows; a take
//     agrees with a scan; the history is linearizable; every seed ends:
//     checked by TestCampaign, no planted defect yet shows them failing.
//   - The store's ListDir agrees with a memory bucket:
//     TestStoreListDirAgreesWithAMemoryBucket.
