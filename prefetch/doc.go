// Package prefetch predicts the order in which a training job reads its
// dataset and warms the coming items ahead of the reader.
//
// It has three parts, and imports nothing of stallfs:
//
//   - A Layout maps dataset indices to paths, exactly as the job's dataset
//     class does: ImageFolder (torchvision's ImageFolder/DatasetFolder),
//     Sorted (every regular file by path), DALIRoot (DALI fn.readers.file
//     with file_root) and ParseList (a file list, DALI file_list lines
//     included).
//   - An Order maps an epoch to the indices read in it: Sequential,
//     TorchRandom (RandomSampler with a seeded generator), TorchDistributed
//     (DistributedSampler), TorchGlobal (RandomSampler on the global
//     generator inside a DataLoader), List (pushed at run time) and
//     DALIFile (fn.readers.file shuffling and sharding). Spec and Build
//     make both from flags or a control request.
//   - A Prefetcher follows the reader (Observe) through the predicted
//     order and calls a Warmer for the items ahead of it. NewReaders
//     follows several readers at once (the ranks of one node sharing a
//     mount): a read goes to the reader that expects it soonest.
//
// # Exactness
//
// The torch orders equal, element for element, what PyTorch computes: the
// CPU generator is MT19937 seeded with the low 32 bits of the seed taken
// modulo 2^64; random64 draws the high word first; randperm keeps
// PyTorch's modulo bias, and from PyTorch 2.7 switches algorithm at
// n >= 214,748,364 (TorchVersion selects the variant; Debian's 1.13 is
// TorchLegacy). Tests compare against the real PyTorch and torchvision
// (testdata/torch/orders.py) and DALI's shuffle against libstdc++'s
// std::shuffle compiled with g++ (testdata/torch/dali_shuffle.cc). Python's
// str.lower() differs from Go's for "İ"; the imagefolder extension test
// follows Python.
//
// # Prefetcher invariants
//
//   - Observe never blocks: observations go through a bounded queue
//     (Options.QueueSize); the excess is dropped and counted (Stats.Dropped).
//   - At most Options.Concurrency Warm calls run at once (all readers
//     together); at most Options.Ahead items, and Options.AheadBytes bytes
//     when the Warmer is a Sizer, are issued ahead of each reader and not
//     yet read; of those, at most Options.NextEpochAhead are in an epoch
//     after the reader's, so that a job's backend traffic during an epoch
//     is that epoch's misses plus at most one round of the next one's.
//   - The reader's position is the lowest predicted position not yet
//     observed. A read matches when it is at an unread position within
//     Options.Window of it (a DataLoader with workers reorders reads
//     within prefetch_factor*workers*batch_size). When most of the window
//     is read past a position, the position is declared skipped, so a lost
//     observation cannot stall tracking.
//   - The tracker moves to the next epoch when, near the end of the
//     current one, a read matches the head of the next epoch's order; when
//     it matches the head of the current order again, the job repeats one
//     order every epoch (DistributedSampler without set_epoch) and that is
//     predicted from then on. Issuing runs across epoch boundaries.
//   - Once Options.CheckReads reads were observed, if fewer than
//     Options.MinMatchRate of the last CheckReads matched, prefetching
//     stops for that reader, the reason is logged once and kept in
//     ReaderStats.DisabledReason, until SetOrder, SetOrderAt, SetReaders or
//     PushList installs another order. A read that no reader matches is
//     a miss of the readers whose epoch holds the file (of all of them
//     when none does).
//   - Memory: the tracker holds the current epoch's order, an int32 per
//     dataset item and per position, and a bit per position; a Layout holds
//     its paths in one string plus about 12 bytes per path.
//   - Close (or the end of Run's ctx) stops Run and cancels every Warm
//     call; Run returns only once every goroutine it started has returned.
package prefetch
