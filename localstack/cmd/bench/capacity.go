package main

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
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
	// Retention is what retention spends per finished job with one
	// upload: staling the job and expiring the upload (0: unmeasured, no
	// retention lines).
	Retention retentionCost
}

// retentionCost is what the recovery function's retention runs spend per
// finished job (staled, its one upload expired), as the drain test measures
// it (go test -tags sweepload -run TestSweepsDrain -v ./internal/recovery).
type retentionCost struct {
	// CPUMsPerJob is processor time per job: staling it and expiring its
	// upload (this machine's core standing for one vCPU).
	CPUMsPerJob float64
	// JobsPerSPerRun is the rate one retention invocation a minute keeps
	// up with by its round trips at AWS latencies (its stale and media
	// sweeps sharing its budget).
	JobsPerSPerRun float64
	// TableWCUPerJob are the table's write units per job: the stale
	// transaction (the job, its job.stale event, the upload's release) and
	// the upload's expiry, which the bench's pipeline units do not include.
	TableWCUPerJob float64
}

// retentionMeasured is the drain test's figures (docs/performance.md,
// "The sweeps"), the slower of two runs: 0.65 ms staling a job and 0.87
// expiring its upload; 1,401 jobs/s per invocation; 5.3 table write units
// staling, 1.0 expiring.
var retentionMeasured = retentionCost{CPUMsPerJob: 1.52, JobsPerSPerRun: 1401, TableWCUPerJob: 6.3}

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
	// RetainParts is how many retention invocations a minute share the
	// sweep shards; RecoveryMemoryMB their function's memory (its vCPU
	// share: one per 1,769 MB); SweepBudget each invocation's budget.
	RetainParts      int
	RecoveryMemoryMB int
	SweepBudget      time.Duration
}

// lambdaMBPerVCPU is the memory at which a function has one full vCPU.
const lambdaMBPerVCPU = 1769.0

// currentDesign reads the shipped settings.
func currentDesign() design {
	d := design{TierConcurrency: map[job.Tier]int{}, TierFlagShards: store.TierFlagShards,
		SweepShards: resources.SweepShards, StatsShards: store.StatsShards, RetainParts: resources.RetainParts,
		RecoveryMemoryMB: resources.FunctionSizes[resources.FuncRecovery].MemoryMB, SweepBudget: recovery.BudgetDefault}
	for _, q := range resources.For(job.Local).Queues {
		d.TierConcurrency[q.Tier] = q.MaxConcurrency
	}
	return d
}

// capacity computes, for each limit, the sustained jobs/s at which it
// saturates, sorted lowest first: the first is the bottleneck.
func capacity(m mix, d design) []limit {
	var out []limit
	add := func(name string, v float64, why string) {
		if math.IsNaN(v) || v <= 0 {
			v = math.Inf(1)
		}
		out = append(out, limit{name, v, why})
	}
	// SQS FIFO: one message per job per tier queue; a group per job.
	for _, t := range []job.Tier{job.High, job.Medium, job.Low} {
		if s := m.TierShare[t]; s > 0 {
			add("sqs fifo "+string(t)+" queue", sqsFIFOPerQueue/s,
				fmt.Sprintf("high-throughput FIFO %.0f msg/s per queue, %.0f%% of jobs; message group per job (%.0f/s per group never binds)", sqsFIFOPerQueue, 100*s, sqsPerGroup))
		}
	}
	// Lambda concurrency per tier: each instance works one batch at a time,
	// its jobs in parallel.
	if m.PublisherBatchSeconds > 0 {
		for _, t := range []job.Tier{job.High, job.Medium, job.Low} {
			s := m.TierShare[t]
			if s == 0 {
				continue
			}
			perInstance := m.JobsPerBatch / m.PublisherBatchSeconds
			add("lambda concurrency "+string(t), float64(d.TierConcurrency[t])*perInstance/s,
				fmt.Sprintf("ESM MaximumConcurrency %d × %.1f jobs per %.2f s batch, %.0f%% of jobs", d.TierConcurrency[t], m.JobsPerBatch, m.PublisherBatchSeconds, 100*s))
		}
	}
	// Retention's execution seconds per job: an invocation's budget holds
	// a minute's worth of JobsPerSPerRun.
	retainBusy := 0.0
	if r := m.Retention; r.JobsPerSPerRun > 0 && d.SweepBudget > 0 {
		retainBusy = d.SweepBudget.Seconds() / (60 * r.JobsPerSPerRun)
	}
	if busy := m.PublisherSecondsPerJob + m.APISecondsPerJob + retainBusy; busy > 0 {
		add("lambda account concurrency", lambdaAccountConcurrency/busy,
			fmt.Sprintf("%.0f concurrent executions per region; %.3f s of functions per job (retention %.4f)", lambdaAccountConcurrency, busy, retainBusy))
	}
	// Retention: RetainParts invocations a minute, each over its shards
	// with its own processor and budget.
	if r := m.Retention; d.RetainParts > 0 && d.SweepBudget > 0 {
		if r.JobsPerSPerRun > 0 {
			add("recovery retention (round trips)", float64(d.RetainParts)*r.JobsPerSPerRun,
				fmt.Sprintf("%d invocations a minute over disjoint sweep shards, %.0f jobs/s each at AWS latencies (stale + media sweeps in a %s budget)", d.RetainParts, r.JobsPerSPerRun, d.SweepBudget))
		}
		if r.CPUMsPerJob > 0 && d.RecoveryMemoryMB > 0 {
			vcpu := float64(d.RecoveryMemoryMB) / lambdaMBPerVCPU
			add("recovery retention (processor)", float64(d.RetainParts)*vcpu*d.SweepBudget.Seconds()*1000/r.CPUMsPerJob/60,
				fmt.Sprintf("%d invocations a minute at %d MB (%.2f vCPU) for %s each; %.2f ms of processor per job (staled, its upload expired)", d.RetainParts, d.RecoveryMemoryMB, vcpu, d.SweepBudget, r.CPUMsPerJob))
		}
	}
	// Hot keys.
	if m.ClaimsPerJob > 0 {
		maxShare := 0.0
		for _, s := range m.TierShare {
			maxShare = math.Max(maxShare, s)
		}
		add("dynamodb tier flag", dynamoPartitionWCU*float64(d.TierFlagShards)/(2*m.ClaimsPerJob*maxShare),
			fmt.Sprintf("each claim's ConditionCheck: 2 WCU on one of %d copies of its tier's flag (1,000 WCU/s each), busiest tier %.0f%%", d.TierFlagShards, 100*maxShare))
	}
	if m.StatsWritesPerJob > 0 {
		add("dynamodb hourly stats counter", dynamoPartitionWCU*float64(d.StatsShards)/m.StatsWritesPerJob,
			fmt.Sprintf("%.2f counter writes per job (an Update in the finishing transaction) over %d shards", m.StatsWritesPerJob, d.StatsShards))
	}
	if m.SweepWCUPerJob > 0 {
		add("dynamodb sweep index shard", dynamoPartitionWCU*float64(d.SweepShards)/m.SweepWCUPerJob,
			fmt.Sprintf("%.0f WCU per job in a status's bySweep partition, %d shards", m.SweepWCUPerJob, d.SweepShards))
	}
	// The table's and each index's on-demand throughput quota.
	if u := m.WriteUnitsPerJob; len(u) > 0 {
		names := make([]string, 0, len(u))
		for k := range u {
			names = append(names, k)
		}
		sort.Strings(names)
		busiest := ""
		for _, k := range names {
			if k != "table" && (busiest == "" || u[k] > u[busiest]) {
				busiest = k
			}
		}
		if u["table"] > 0 {
			why := fmt.Sprintf("default quota %.0f write units/s (adjustable); %.1f per job in the table (measured)", dynamoOnDemandWRU, u["table"])
			if r := m.Retention.TableWCUPerJob; r > 0 {
				why += fmt.Sprintf(" + %.1f of retention (staling, the upload's expiry)", r)
			}
			add("dynamodb on-demand table throughput", dynamoOnDemandWRU/(u["table"]+m.Retention.TableWCUPerJob), why)
		}
		if busiest != "" && u[busiest] > 0 {
			add("dynamodb on-demand index throughput ("+busiest+")", dynamoOnDemandWRU/u[busiest],
				fmt.Sprintf("default quota %.0f write units/s per index (adjustable); %.1f per job in %s, the busiest index (measured)", dynamoOnDemandWRU, u[busiest], busiest))
		}
	}
	add("dynamodb breaker partition", math.Inf(1),
		fmt.Sprintf("not job-bound: one Query per instance per cache period (5 s) — %.0f RCU/s allow 15,000 instances; writes only on failures", dynamoPartitionRCU))
	if m.APIRequestsPerJob > 0 {
		add("api gateway throttle", apiGatewayRPS/m.APIRequestsPerJob,
			fmt.Sprintf("HTTP API %.0f requests/s per account and region, %.1f per job", apiGatewayRPS, m.APIRequestsPerJob))
	}
	if m.EventsPerJob > 0 {
		add("eventbridge putevents", eventBridgePutEventsTPS*10/m.EventsPerJob,
			fmt.Sprintf("%.0f PutEvents/s of 10 entries, %.1f events per job", eventBridgePutEventsTPS, m.EventsPerJob))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].JobsPerS < out[j].JobsPerS })
	return out
}
