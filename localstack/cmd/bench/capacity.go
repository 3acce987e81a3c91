package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/resources"
)

// AWS limits the design touches (us-east-1, checked 2026-11-23 in the AWS
// service quotas pages named beside each).
const (
	// sqs FIFO, high-throughput mode: 70,000 messages/s per queue with
	// batching (docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/high-throughput-fifo.html);
	// 300 messages/s per message group.
	sqsFIFOPerQueue = 70000.0
	sqsPerGroup     = 300.0
	// dynamoPartitionWCU / RCU: per partition (and so per item and per
	// key), docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html.
	dynamoPartitionWCU = 1000.0
	dynamoPartitionRCU = 3000.0
	// apiGatewayRPS: HTTP API account throttle per region (steady state).
	apiGatewayRPS = 10000.0
	// lambdaAccountConcurrency: the default regional concurrency quota.
	lambdaAccountConcurrency = 1000.0
	// eventBridgePutEventsTPS: PutEvents requests/s (us-east-1), up to 10
	// entries each.
	eventBridgePutEventsTPS = 10000.0
	// dynamoOnDemandWRU: an on-demand table's default throughput quota,
	// 40,000 write request units/s (docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html,
	// "Throughput default quotas"; adjustable on request). Read here as
	// applying to the table and to each of its indexes apiece.
	dynamoOnDemandWRU = 40000.0
)

// mix is what one published job costs, measured by the bench, as the
// capacity model needs it.
type mix struct {
	// TierShare is the share of jobs per publish tier (sums to 1).
	TierShare map[job.Tier]float64
	// PublisherSecondsPerJob is the publisher's measured billed seconds
	// per job (a batch runs its jobs in parallel: batch time ÷ batch jobs).
	PublisherSecondsPerJob float64
	// PublisherBatchSeconds is the publisher's mean invocation duration.
	PublisherBatchSeconds float64
	// JobsPerBatch is the mean number of jobs per publisher invocation.
	JobsPerBatch float64
	// APIRequestsPerJob are API Gateway requests per job (sign, confirm,
	// submit, reads).
	APIRequestsPerJob float64
	// APISecondsPerJob is the API function's billed seconds per job.
	APISecondsPerJob float64
	// StatsWritesPerJob is how many hourly-counter writes a job causes.
	StatsWritesPerJob float64
	// ClaimsPerJob is how many claims (each checks its tier's flag) a job
	// takes.
	ClaimsPerJob float64
	// SweepWCUPerJob is the bySweep index write units one job spends in
	// one status partition: the measured bySweep units spread over the
	// statuses a job passes (queued, running, a finish); 6 when unmeasured.
	SweepWCUPerJob float64
	// EventsPerJob are the events put on the bus per job.
	EventsPerJob float64
	// WriteUnitsPerJob are the DynamoDB write units one job spends, as
	// DynamoDB reported them: "table" and each index by name.
	WriteUnitsPerJob map[string]float64
	// Sweeps are what the recovery function's sweeps spend per item, by
	// sweep name (recovery.SweepScheduled …; nil: unmeasured, no sweep
	// lines).
	Sweeps map[string]sweepCost
}

// sweepCost is what one of the recovery function's sweeps spends per item
// it handles, as the drain test measures it (go test -tags sweepload -run
// TestSweepsDrain -v ./internal/recovery).
type sweepCost struct {
	// ItemsPerS is one invocation's rate while the sweep runs, at AWS
	// latencies (items per modelled second of its runs with work).
	ItemsPerS float64
	// CPUMsPerItem is processor time per item (this machine's core
	// standing for one vCPU).
	CPUMsPerItem float64
	// TableWCUPerItem are the table's write units per item, which the
	// bench's pipeline units do not include; WCUPerItem the same with
	// every index's, what the bill prices (0: the table's alone).
	TableWCUPerItem, WCUPerItem float64
}

// sweepsMeasured is the drain test's figures (docs/performance.md, "The
// sweeps"), each sweep Concurrency (128) items at a time; the processor's
// the slower of the runs measured (media 0.80 and 0.87 ms).
var sweepsMeasured = map[string]sweepCost{
	recovery.SweepScheduled: {ItemsPerS: 3119, CPUMsPerItem: 1.70, TableWCUPerItem: 4},
	recovery.SweepParked:    {ItemsPerS: 4200, CPUMsPerItem: 1.30, TableWCUPerItem: 1},
	recovery.SweepStuck:     {ItemsPerS: 3938, CPUMsPerItem: 1.27, TableWCUPerItem: 2.5},
	// Staling's and the upload's expiry's write units are those of one
	// published job's retention, each transaction priced by DynamoDB's
	// rules (store.TestAPublishedJobWritesNarrowIndexEntries, which holds
	// them at these bounds): the job (1 KB, compact) and its job.stale
	// event, doubled, and the upload's release in one transaction; the
	// job's status indexes re-keyed, its sweep entry out, the upload's in;
	// then the upload's expiry and its sweep entry out.
	recovery.SweepStale: {ItemsPerS: 4953, CPUMsPerItem: 0.66, TableWCUPerItem: 6, WCUPerItem: 14},
	recovery.SweepMedia: {ItemsPerS: 2644, CPUMsPerItem: 0.87, TableWCUPerItem: 1, WCUPerItem: 2},
}

// limit is one AWS limit and the jobs/s at which the design saturates it.
type limit struct {
	Name      string  `json:"name"`
	JobsPerS  float64 `json:"jobs_per_s"`
	Reasoning string  `json:"reasoning"`
}

// design is what the code sets that the limits apply to.
type design struct {
	TierConcurrency map[job.Tier]int
	TierFlagShards  int
	SweepShards     int
	StatsShards     int
	// ReleaseParts and RetainParts are how many release and retention
	// invocations a minute share the sweep shards; RecoverEvery is the
	// stuck sweep's interval (one invocation); RecoveryMemoryMB their
	// function's memory (its vCPU share: one per 1,769 MB); SweepBudget
	// each invocation's budget.
	ReleaseParts     int
	RetainParts      int
	RecoverEvery     time.Duration
	RecoveryMemoryMB int
	SweepBudget      time.Duration
}

// lambdaMBPerVCPU is the memory at which a function has one full vCPU.
const lambdaMBPerVCPU = 1769.0

// currentDesign reads the shipped settings.
func currentDesign() design {
	d := design{TierConcurrency: map[job.Tier]int{}, TierFlagShards: store.TierFlagShards,
		SweepShards: resources.SweepShards, StatsShards: store.StatsShards, ReleaseParts: resources.ReleaseParts, RetainParts: resources.RetainParts,
		RecoveryMemoryMB: resources.FunctionSizes[resources.FuncRecovery].MemoryMB, SweepBudget: recovery.BudgetDefault}
	for _, sc := range resources.For(job.Local).Schedules {
		if sc.Task == resources.TaskRecover {
			d.RecoverEvery = sc.Interval
		}
	}
	for _, q := range resources.For(job.Local).Queues {
		d.TierConcurrency[q.Tier] = q.MaxConcurrency
	}
	return d
}

// capacity computes, for each limit, the sustained jobs/s at which it
// saturates, sorted lowest first: the first is the bottleneck.
func capacity(m mix, d design) []limit {
	var out limits
	out.addQueues(m)
	out.addConcurrency(m, d)
	for _, l := range sweepLines(m, d) {
		out.add(l.Name, l.JobsPerS, l.Reasoning)
	}
	out.addHotKeys(m, d)
	out.addThroughputQuotas(m)
	out.addServiceQuotas(m)
	sort.SliceStable(out, func(i, j int) bool { return out[i].JobsPerS < out[j].JobsPerS })
	return out
}

// limits is the limits capacity finds, in the order it finds them.
type limits []limit

// add appends a limit; a rate that is not a positive number is unbounded.
func (ls *limits) add(name string, v float64, why string) {
	if math.IsNaN(v) || v <= 0 {
		v = math.Inf(1)
	}
	*ls = append(*ls, limit{name, v, why})
}

// addQueues adds the SQS FIFO limits: one message per job per tier queue;
// a group per job.
func (ls *limits) addQueues(m mix) {
	for _, t := range []job.Tier{job.High, job.Medium, job.Low} {
		if s := m.TierShare[t]; s > 0 {
			ls.add("sqs fifo "+string(t)+" queue", sqsFIFOPerQueue/s,
				fmt.Sprintf("high-throughput FIFO %.0f msg/s per queue, %.0f%% of jobs; message group per job (%.0f/s per group never binds)", sqsFIFOPerQueue, 100*s, sqsPerGroup))
		}
	}
}

// addConcurrency adds Lambda's concurrency limits: per tier, each instance
// works one batch at a time, its jobs in parallel; per account, the
// functions' seconds per job, retention's included (every job goes stale
// and its upload expires: an invocation's budget holds a minute's worth of
// what it keeps up with by its round trips).
func (ls *limits) addConcurrency(m mix, d design) {
	if m.PublisherBatchSeconds > 0 {
		for _, t := range []job.Tier{job.High, job.Medium, job.Low} {
			s := m.TierShare[t]
			if s == 0 {
				continue
			}
			perInstance := m.JobsPerBatch / m.PublisherBatchSeconds
			ls.add("lambda concurrency "+string(t), float64(d.TierConcurrency[t])*perInstance/s,
				fmt.Sprintf("ESM MaximumConcurrency %d × %.1f jobs per %.2f s batch, %.0f%% of jobs", d.TierConcurrency[t], m.JobsPerBatch, m.PublisherBatchSeconds, 100*s))
		}
	}
	retainBusy := 0.0
	if r := retainPerRun(m, d); r > 0 {
		retainBusy = d.SweepBudget.Seconds() / (60 * r)
	}
	if busy := m.PublisherSecondsPerJob + m.APISecondsPerJob + retainBusy; busy > 0 {
		ls.add("lambda account concurrency", lambdaAccountConcurrency/busy,
			fmt.Sprintf("%.0f concurrent executions per region; %.3f s of functions per job (retention %.4f)", lambdaAccountConcurrency, busy, retainBusy))
	}
}

// addHotKeys adds the limits of DynamoDB's hot keys: the tier flags, the
// hourly stats counter, the sweep index's shards.
func (ls *limits) addHotKeys(m mix, d design) {
	if m.ClaimsPerJob > 0 {
		maxShare := 0.0
		for _, s := range m.TierShare {
			maxShare = math.Max(maxShare, s)
		}
		ls.add("dynamodb tier flag", dynamoPartitionWCU*float64(d.TierFlagShards)/(2*m.ClaimsPerJob*maxShare),
			fmt.Sprintf("each claim's ConditionCheck: 2 WCU on one of %d copies of its tier's flag (1,000 WCU/s each), busiest tier %.0f%%", d.TierFlagShards, 100*maxShare))
	}
	if m.StatsWritesPerJob > 0 {
		ls.add("dynamodb hourly stats counter", dynamoPartitionWCU*float64(d.StatsShards)/m.StatsWritesPerJob,
			fmt.Sprintf("%.2f counter writes per job (an Update in the finishing transaction) over %d shards", m.StatsWritesPerJob, d.StatsShards))
	}
	if m.SweepWCUPerJob > 0 {
		ls.add("dynamodb sweep index shard", dynamoPartitionWCU*float64(d.SweepShards)/m.SweepWCUPerJob,
			fmt.Sprintf("%.0f WCU per job in a status's bySweep partition, %d shards", m.SweepWCUPerJob, d.SweepShards))
	}
}

// addThroughputQuotas adds the table's and its busiest index's on-demand
// throughput quotas.
func (ls *limits) addThroughputQuotas(m mix) {
	u := m.WriteUnitsPerJob
	if len(u) == 0 {
		return
	}
	names := slices.Sorted(maps.Keys(u))
	busiest := ""
	for _, k := range names {
		if k != "table" && (busiest == "" || u[k] > u[busiest]) {
			busiest = k
		}
	}
	if u["table"] > 0 {
		why := fmt.Sprintf("default quota %.0f write units/s (adjustable); %.1f per job in the table (measured)", dynamoOnDemandWRU, u["table"])
		r := m.Sweeps[recovery.SweepStale].TableWCUPerItem + m.Sweeps[recovery.SweepMedia].TableWCUPerItem
		if r > 0 {
			why += fmt.Sprintf(" + %.1f of retention (staling, the upload's expiry)", r)
		}
		ls.add("dynamodb on-demand table throughput", dynamoOnDemandWRU/(u["table"]+r), why)
	}
	if busiest != "" && u[busiest] > 0 {
		ls.add("dynamodb on-demand index throughput ("+busiest+")", dynamoOnDemandWRU/u[busiest],
			fmt.Sprintf("default quota %.0f write units/s per index (adjustable); %.1f per job in %s, the busiest index (measured)", dynamoOnDemandWRU, u[busiest], busiest))
	}
}

// addServiceQuotas adds the breaker's partition (not job-bound), API
// Gateway's throttle and EventBridge's PutEvents quota.
func (ls *limits) addServiceQuotas(m mix) {
	ls.add("dynamodb breaker partition", math.Inf(1),
		fmt.Sprintf("not job-bound: one Query per instance per cache period (5 s) — %.0f RCU/s allow 15,000 instances; writes only on failures", dynamoPartitionRCU))
	if m.APIRequestsPerJob > 0 {
		ls.add("api gateway throttle", apiGatewayRPS/m.APIRequestsPerJob,
			fmt.Sprintf("HTTP API %.0f requests/s per account and region, %.1f per job", apiGatewayRPS, m.APIRequestsPerJob))
	}
	if m.EventsPerJob > 0 {
		ls.add("eventbridge putevents", eventBridgePutEventsTPS*10/m.EventsPerJob,
			fmt.Sprintf("%.0f PutEvents/s of 10 entries, %.1f events per job", eventBridgePutEventsTPS, m.EventsPerJob))
	}
}

// retainPerRun is the rate of finished jobs, each with one upload, that one
// retention invocation a minute keeps up with by its round trips: its stale
// and media sweeps share its budget (0: unmeasured).
func retainPerRun(m mix, d design) float64 {
	st, md := m.Sweeps[recovery.SweepStale], m.Sweeps[recovery.SweepMedia]
	if st.ItemsPerS <= 0 || md.ItemsPerS <= 0 || d.SweepBudget <= 0 {
		return 0
	}
	return d.SweepBudget.Seconds() / (1/st.ItemsPerS + 1/md.ItemsPerS) / 60
}

// sweepLines are the recovery function's sweeps as limits: for each, the
// jobs/s of a workload in which every job passes through it once (every
// job scheduled; an outage that parks every job; every job finished with
// one upload) that its invocations keep up with, by their round trips at
// AWS latencies and by their processors, the lower of the two. A sweep's
// invocations each give it its share of the budget: half for each release
// sweep (its share when both have work), half at most for staling, the
// rest for the uploads (a finished job costs its staling and its upload's
// expiry in the same run: the media line is the two together); the stuck
// sweep has its run's whole budget, once an interval. Stuck jobs are the
// failed few (a lost message, a silent worker), not a share of every job:
// the stuck line is not job-bound and states the stuck jobs/s it keeps up
// with.
func sweepLines(m mix, d design) []limit {
	if len(m.Sweeps) == 0 || d.SweepBudget <= 0 {
		return nil
	}
	budget := d.SweepBudget.Seconds()
	vcpu := float64(d.RecoveryMemoryMB) / lambdaMBPerVCPU
	var out []limit
	// line is a sweep given seconds of each of perMinute invocations a
	// minute, at cost per job.
	line := func(name, what string, perMinute, seconds float64, cost sweepCost, jobBound bool) {
		if cost.ItemsPerS <= 0 {
			return
		}
		rt := perMinute * cost.ItemsPerS * seconds / 60
		cpu := math.Inf(1)
		if cost.CPUMsPerItem > 0 && vcpu > 0 {
			cpu = perMinute * vcpu * seconds * 1000 / cost.CPUMsPerItem / 60
		}
		v, by := rt, "its round trips"
		if cpu < rt {
			v, by = cpu, "its processor"
		}
		why := fmt.Sprintf("%s: %.1f invocations a minute, %.0f s of each; %.0f items/s at AWS latencies (%.0f jobs/s), %.2f ms of processor an item at %d MB, %.2f vCPU (%.0f jobs/s); %.1f table write units an item; bound by %s",
			what, perMinute, seconds, cost.ItemsPerS, rt, cost.CPUMsPerItem, d.RecoveryMemoryMB, vcpu, cpu, cost.TableWCUPerItem, by)
		if !jobBound {
			why = fmt.Sprintf("not job-bound: keeps up with %.0f stuck jobs/s; %s", v, why)
			v = math.Inf(1)
		}
		out = append(out, limit{"recovery " + name, v, why})
	}
	if d.ReleaseParts > 0 {
		line("release scheduled", "every job scheduled (scheduleAt)", float64(d.ReleaseParts), budget/2, m.Sweeps[recovery.SweepScheduled], true)
		line("release parked", "every job parked (an outage)", float64(d.ReleaseParts), budget/2, m.Sweeps[recovery.SweepParked], true)
	}
	if d.RecoverEvery > 0 {
		line("stuck", "stuck jobs re-sent, taken back or failed", time.Minute.Seconds()/d.RecoverEvery.Seconds(), budget, m.Sweeps[recovery.SweepStuck], false)
	}
	if d.RetainParts > 0 {
		st, md := m.Sweeps[recovery.SweepStale], m.Sweeps[recovery.SweepMedia]
		line("stale", "every job finished, staling capped at half the budget", float64(d.RetainParts), budget/2, st, true)
		if st.ItemsPerS > 0 && md.ItemsPerS > 0 {
			both := sweepCost{ItemsPerS: 1 / (1/st.ItemsPerS + 1/md.ItemsPerS), CPUMsPerItem: st.CPUMsPerItem + md.CPUMsPerItem,
				TableWCUPerItem: st.TableWCUPerItem + md.TableWCUPerItem}
			line("stale + media", fmt.Sprintf("every job finished and its one upload expired (media %.0f items/s, %.2f ms an item)", md.ItemsPerS, md.CPUMsPerItem),
				float64(d.RetainParts), budget, both, true)
		}
	}
	return out
}
