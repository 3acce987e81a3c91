package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/spf13/cobra"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/bus"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/relayfailures"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/webhook"
)

// relayCmd holds the commands on the relay's failures.
func (c *cli) relayCmd() *cobra.Command {
	g := group("relay", "The event relay's failures: replay the stream batches it gave up on")
	g.AddCommand(c.relayReplayCmd())
	return g
}

// replayFlags holds the flags of relay replay.
type replayFlags struct {
	dryRun, asJSON bool
	queueURL       string
}

// relayReplayCmd replays the records on the relay's failure queue.
func (c *cli) relayReplayCmd() *cobra.Command {
	var f replayFlags
	var co *common
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Relay again the stream batches on the relay's failure queue, then delete their records",
		Long: `Each record on the relay's failure queue (conveyor-<env>-relay-failures) names a
stream batch the relay mapping gave up on: its shard and sequence range. replay reads
those records again from the table's stream — or, once the stream has trimmed them
(24 hours), the events of the batch's arrival window from the table — and relays them
as the relay function does: to the event bus, with their webhook deliveries queued.
A record is deleted only once every event of its batch was relayed; one that fails stays
on the queue, and the command exits 1.

It talks to AWS with your credentials (the environment's region and profile from the
environments file) and configures the relay as the deployed relay function is
configured (its environment, read from Lambda). Locally it reads .local/env.
Relaying again is at least once: consumers dedupe by the event's id.`,
		Example: `  conveyor relay replay --dry-run
  conveyor relay replay --env prod-ru
  conveyor relay replay --env staging --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.relayReplay(cmd.Context(), f, co) },
	}
	co = c.addCommon(cmd, "the environment: local, or a deployed one (staging, prod-ru, prod-en)")
	fs := cmd.Flags()
	fs.BoolVar(&f.dryRun, "dry-run", false, "read the records and count their events; relay nothing, delete nothing")
	fs.BoolVar(&f.asJSON, "json", false, "print the counts as JSON")
	fs.StringVar(&f.queueURL, "queue-url", "", "the failure queue's URL (default: the environment's, by its name)")
	return cmd
}

// replaySetup is what a replay in one environment works with.
type replaySetup struct {
	name     string
	awsCfg   aws.Config
	cfg      config.Config
	queueURL string
}

// relayReplay replays the failures of one environment.
func (c *cli) relayReplay(ctx context.Context, f replayFlags, o *common) error {
	rs, err := c.replaySetup(ctx, o, f.queueURL)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st := store.New(store.NewClient(rs.awsCfg), rs.cfg.Table, c.now)
	if rs.cfg.TableIndexes == config.TableIndexesRetired {
		st.ReadRetiredIndexes()
	}
	endpoints, err := webhook.NewEndpoints(webhook.EndpointsConfig{Store: st, Local: rs.cfg.Env == job.Local, Now: c.now})
	if err != nil {
		return err
	}
	rel, err := relay.New(relay.Config{Decode: store.DecodeEvents, Bus: bus.New(rs.awsCfg, rs.cfg.EventBus), Source: resources.EventSource(rs.cfg.Env),
		BusEvents: rs.cfg.BusEvents, Sender: queue.NewSender(queue.NewClient(rs.awsCfg), rs.cfg.QueueURLs, queue.Fairness(rs.cfg.Fairness)),
		Webhooks: webhook.Planner{Endpoints: endpoints}, Now: c.now, Logger: log})
	if err != nil {
		return err
	}
	verb := "replayed"
	if f.dryRun {
		verb = "would replay"
	}
	rp, err := relay.NewReplayer(relay.ReplayConfig{
		Queue: relayfailures.NewQueue(rs.awsCfg, rs.queueURL), Stream: relayfailures.NewStream(rs.awsCfg), Feed: st,
		Relay: rel, DryRun: f.dryRun, Logger: log,
		Progress: func(p relay.ReplayedFailure) { fmt.Fprintln(c.stderr, progressLine(rs.name, verb, p, f.dryRun)) },
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "%s: reading %s\n", rs.name, rs.queueURL)
	res, err := rp.Run(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", rs.name, err)
	}
	if f.asJSON {
		if err := c.printJSON(map[string]any{"environment": rs.name, "dryRun": f.dryRun, "messages": res.Messages,
			"deleted": res.Deleted, "kept": res.Kept, "fromStream": res.FromStream, "fromTable": res.FromTable,
			"events": res.Events, "relayed": res.Relayed, "put": res.Put, "webhooks": res.Webhooks}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(c.stdout, summaryLine(rs.name, res, f.dryRun))
	}
	if res.Kept > 0 && !f.dryRun {
		return errPartial
	}
	return nil
}

// progressLine is one failure record's line on stderr.
func progressLine(env, verb string, p relay.ReplayedFailure, dryRun bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s failure %s", env, verb, p.MessageID)
	if p.Batch.ShardID != "" {
		fmt.Fprintf(&b, " (shard %s, %s…%s)", p.Batch.ShardID, p.Batch.StartSequenceNumber, p.Batch.EndSequenceNumber)
	}
	if p.Source != "" {
		fmt.Fprintf(&b, ": %d events from the %s", p.Events, p.Source)
	}
	switch {
	case dryRun && p.Err == nil:
	case p.Deleted:
		fmt.Fprintf(&b, ", %d relayed (%d on the bus, %d webhooks queued), record deleted", p.Relayed, p.Put, p.Webhooks)
	default:
		fmt.Fprintf(&b, ", %d relayed; record kept: %v", p.Relayed, p.Err)
	}
	return b.String()
}

// summaryLine is what a replay did, on stdout.
func summaryLine(env string, r relay.ReplayResult, dryRun bool) string {
	if r.Messages == 0 {
		return env + ": no relay failures to replay"
	}
	if dryRun {
		return fmt.Sprintf("%s: %d failure records, %d events (%d from the stream, %d from the table); nothing relayed (dry run)",
			env, r.Messages, r.Events, r.FromStream, r.FromTable)
	}
	return fmt.Sprintf("%s: %d failure records: %d replayed and deleted, %d kept; %d events relayed (%d on the bus), %d webhooks queued",
		env, r.Messages, r.Deleted, r.Kept, r.Relayed, r.Put, r.Webhooks)
}

// replaySetup resolves the environment: locally .local/env's names and
// emulators; a deployed environment's AWS settings from the environments
// file and its relay function's configuration from Lambda.
func (c *cli) replaySetup(ctx context.Context, o *common, queueURL string) (replaySetup, error) {
	if strings.Contains(o.env, ",") {
		return replaySetup{}, usagef("a replay runs in one environment: name it with --env")
	}
	name := o.env
	if name == "" || name == localEnv {
		return c.localReplaySetup(ctx, o, queueURL)
	}
	e, err := job.ParseEnv(name)
	if err != nil || e == job.Local {
		return replaySetup{}, usagef("unknown environment %q for a replay: name local, staging, prod-ru or prod-en", name)
	}
	cf, err := c.loadConfig(o)
	if err != nil {
		return replaySetup{}, err
	}
	awsCfg, err := c.awsConfig(ctx, cf.Environments[name].awsOptions()...)
	if err != nil {
		return replaySetup{}, fmt.Errorf("the AWS configuration: %w", err)
	}
	def := resources.For(e)
	fn := def.Prefix + "-" + resources.FuncRelay
	vars, err := relayfailures.FunctionEnvironment(ctx, awsCfg, fn)
	if err != nil {
		return replaySetup{}, fmt.Errorf("%s: %w", name, err)
	}
	cfg, err := config.From(func(k string) string { return vars[k] }, resources.FuncRelay)
	if err != nil {
		return replaySetup{}, fmt.Errorf("%s: the relay function's %w", name, err)
	}
	if queueURL == "" {
		if queueURL, err = relayfailures.QueueURL(ctx, awsCfg, def.EventStream.FailureQueueName); err != nil {
			return replaySetup{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return replaySetup{name: name, awsCfg: awsCfg, cfg: cfg, queueURL: queueURL}, nil
}

// localReplaySetup reads the local stack's configuration (the environment
// first, then the env file) and reaches its emulators.
func (c *cli) localReplaySetup(ctx context.Context, o *common, queueURL string) (replaySetup, error) {
	file := readEnvFile(o.envFile)
	get := func(k string) string {
		if v := c.getenv(k); v != "" {
			return v
		}
		return file[k]
	}
	if get(config.VarTable) == "" || get("AWS_ENDPOINT_URL") == "" {
		return replaySetup{}, errors.New("no local stack: " + o.envFile + " names no table or emulator; start one with `make run` (it writes .local/env), or pass --env-file")
	}
	cfg, err := config.From(get, resources.FuncRelay)
	if err != nil {
		return replaySetup{}, fmt.Errorf("local: %w", err)
	}
	awsCfg := awsclient.ForEndpoint(awsclient.Endpoints{Default: get("AWS_ENDPOINT_URL"), DynamoDB: get("AWS_ENDPOINT_URL_DYNAMODB")}, get("AWS_REGION"))
	if queueURL == "" {
		def := resources.Named(job.Local, cfg.Table)
		if queueURL, err = relayfailures.QueueURL(ctx, awsCfg, def.EventStream.FailureQueueName); err != nil {
			return replaySetup{}, fmt.Errorf("local: %w", err)
		}
	}
	return replaySetup{name: localEnv, awsCfg: awsCfg, cfg: cfg, queueURL: queueURL}, nil
}
