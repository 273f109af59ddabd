// Package storekit is test support store/sqlite and store/postgres share,
// so their tests and benchmarks run the same bodies on both engines: the
// benchmarks (Stores, each store operation on a fresh database;
// InvokeRefund, the 1200 refund end to end with the runtime's stores in
// the database), and the canonical refund run their multi-process tests
// drive (RefundRequest, Evidence, Adapters, LookupPlan, RefundPlan, and
// Payments, a payments service that performs each idempotency key's
// effect once), and the crash campaign (RunCampaign, CampaignWorker:
// worker processes killed at random and at kill points while they run,
// approve and take over refunds, then every run ended and checked). The
// figures and commands of the benchmarks are in docs/benchmarks.md.
package storekit
