package blob_test

// What package blob promises (its doc comment, and the conformance suite
// of package blobtest that every backend passes: TestConformanceMem,
// TestConformanceFile, TestConformanceMinIO, TestConformanceFakeGCS,
// TestConformanceFaultWrapperPassThrough, TestConformanceCountedOverFault),
// and the test or subtest of the suite that pins each:
//
//  1. PutIfAbsent is atomic: of any number of concurrent creates of one
//     key, exactly one succeeds and every other gives ErrExists:
//     ConcurrentPutIfAbsentHasOneWinner, PutIfAbsentCreatesOnceAndKeepsTheFirst;
//     across processes: TestProcessRaceFile, TestProcessRaceMinIO, and the
//     race can fail: TestProcessRaceCatchesPlainFileblob.
//  2. An object is visible whole or not at all: PutReplacesWholeObject,
//     PutWhoseReaderFailsWritesNothing.
//  3. List returns keys in ascending byte order; ListDir lists one level in
//     the same order, a request a folder: ListIsInByteOrderAndFiltersByPrefix,
//     ListPagesCoverEverythingOnce, ListDirShowsOneLevelInByteOrder,
//     ListDirPagesCoverTheLevelOnce.
//   - Errors are classified into kinds tested with errors.Is, and every
//     error carries the operation and the key: TestClassify,
//     GetMissingIsNotFoundAndNamesTheKey, DeleteRemovesAndMissingIsNotFound,
//     InvalidKeysArePermanentErrors, TestCheckKey,
//     TestS3RequestsWithoutAnAnswerAreRetryable,
//     TestOpenMinIOWrongCredentialsIsPermanent,
//     TestOpenGCSWithoutCredentialsIsPermanent.
//   - A request to a store that stops answering fails in time:
//     TestAnS3StoreThatStopsAnsweringFailsARequestInTime,
//     TestAGCSStoreThatStopsAnsweringFailsARequestInTime,
//     TestAGCSStoreThatFailsEveryRequestFailsItInTime,
//     CanceledContextStopsRequests.
//   - Open wraps every backend in a Counted bucket: TestCountersCountRequests.
//   - The start-up self-test of the conditional create passes on a real
//     store and fails on one that ignores conditions: SelfTestPasses,
//     TestSelfTestFailsOnStoreIgnoringConditions,
//     TestSelfTestRefusesTooManyRacers.
//   - Open takes the URL forms it documents and refuses the others by
//     name: TestOpenRejectsBadURLs, TestOpenFileForms,
//     TestOpenMinIOMissingBucketIsClear.
//   - Package fault: each injector does what its doc says (fault_test.go,
//     one test per fault: TestFailDoesNotMakeTheRequest,
//     TestLostResponseLandsTheWrite, TestFalseExistsAfterTheCreateLanded,
//     TestConflictIsRetryableAndDoesNotWrite,
//     TestCrashAfterNStopsEverythingUntilRevived,
//     TestIgnoreConditionOverwrites, TestKeyAndNthFilters,
//     TestProbabilityIsReproducibleFromTheSeed,
//     TestAnyTakesTheFirstFaultAndAddsDelays, TestDelayHonoursContext).
