package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ratelimit"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestRateLeaseMovesTheBucketOnlyFromWhatWasSeen: the first lease creates
// the bucket, a lease from a stale TAT changes nothing and answers the
// current one, and the item expires store.RateBucketTTL after its TAT.
func TestRateLeaseMovesTheBucketOnlyFromWhatWasSeen(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	st := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, nil)
	ctx := context.Background()
	t1 := time.Now().UTC().Truncate(time.Microsecond)
	t2 := t1.Add(time.Second)
	if ok, _, err := st.RateLease(ctx, "u-lease", time.Time{}, t1); err != nil || !ok {
		t.Fatalf("the first lease: %v, %v", ok, err)
	}
	if ok, cur, err := st.RateLease(ctx, "u-lease", time.Time{}, t2); err != nil || ok || !cur.Equal(t1) {
		t.Fatalf("a lease as if there were no bucket: ok %v, current %v, %v; want refused with %v", ok, cur, err, t1)
	}
	if ok, cur, err := st.RateLease(ctx, "u-lease", t1.Add(-time.Millisecond), t2); err != nil || ok || !cur.Equal(t1) {
		t.Fatalf("a lease from a stale TAT: ok %v, current %v, %v; want refused with %v", ok, cur, err, t1)
	}
	if ok, _, err := st.RateLease(ctx, "u-lease", t1, t2); err != nil || !ok {
		t.Fatalf("a lease from the current TAT: %v, %v", ok, err)
	}
	res, err := env.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Res.Definition.Table.Name), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{resources.AttrPK: &types.AttributeValueMemberS{Value: "RATE#u-lease"}, resources.AttrSK: &types.AttributeValueMemberS{Value: "RATE"}}})
	if err != nil {
		t.Fatal(err)
	}
	if ttl, _ := res.Item[resources.AttrExpiresAt].(*types.AttributeValueMemberN); ttl == nil || ttl.Value != fmt.Sprint(t2.Add(store.RateBucketTTL).Unix()) {
		t.Errorf("the bucket's %s = %v, want its TAT + %v", resources.AttrExpiresAt, res.Item[resources.AttrExpiresAt], store.RateBucketTTL)
	}
	// Whether this emulator answers a refused write with the item
	// (ReturnValuesOnConditionCheckFailure); RateLease reads it otherwise.
	_, err = env.Clients.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(env.Res.Definition.Table.Name),
		Key:                 map[string]types.AttributeValue{resources.AttrPK: &types.AttributeValueMemberS{Value: "RATE#u-lease"}, resources.AttrSK: &types.AttributeValueMemberS{Value: "RATE"}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"), UpdateExpression: aws.String("SET tatUs = :z"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":z": &types.AttributeValueMemberN{Value: "0"}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("a refused write: %v", err)
	}
	t.Logf("the emulator answers a refused write with the item (ALL_OLD): %v", ccf.Item != nil)
}

// TestConcurrentLeasersNeverExceedTheBucketsAllowance: eight leasers (as
// eight instances would) take blocks of up to five units from one bucket
// as fast as the emulator lets them, for two seconds; the units granted
// never exceed Burst + Rate × elapsed, and come close to it.
func TestConcurrentLeasersNeverExceedTheBucketsAllowance(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	st := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, nil)
	l := ratelimit.Limit{Rate: 20, Burst: 30}
	ctx := context.Background()
	var granted, writes, refused atomic.Int64
	start := time.Now()
	stop := start.Add(2 * time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var tat time.Time
			for now := time.Now(); now.Before(stop); now = time.Now() {
				n := min(5, l.Available(tat, now))
				if n < 1 {
					time.Sleep(l.Wait(tat, now))
					continue
				}
				next := l.Take(tat, now, n)
				ok, cur, err := st.RateLease(ctx, "u-shared", tat, next)
				writes.Add(1)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					refused.Add(1)
					tat = cur
					continue
				}
				tat = next
				granted.Add(int64(n))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	allowance := float64(l.Burst) + float64(l.Rate)*elapsed.Seconds()
	if float64(granted.Load()) > allowance {
		t.Errorf("%d units granted in %v, over the allowance %.1f (burst %d + %d a second)", granted.Load(), elapsed, allowance, l.Burst, l.Rate)
	}
	if float64(granted.Load()) < allowance-float64(l.Rate) {
		t.Errorf("%d units granted in %v, well under the allowance %.1f", granted.Load(), elapsed, allowance)
	}
	t.Logf("%d units granted in %v (allowance %.1f); %d writes, %d refused", granted.Load(), elapsed, allowance, writes.Load(), refused.Load())
}

// TestTheRateChecksWriteUnitsPerRequest: the limiter on the
// emulator, measured in the write units DynamoDB says it consumed: a
// burst of 50 requests of one free owner, then that owner hammering past
// its limit, then an owner at a steady rate under its limit.
func TestTheRateChecksWriteUnitsPerRequest(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	st := store.New(dynamodb.NewFromConfig(counter.Attach(env.Config)), env.Res.Definition.Table.Name, nil)
	lm, err := ratelimit.New(ratelimit.Config{Store: st, PerPlan: map[string]ratelimit.Limit{"free": {Rate: 10, Burst: 60}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	units := func() float64 { return counter.Units()["write"] }
	run := func(name, owner string, n int, every time.Duration) (served, throttled int) {
		t.Helper()
		before := units()
		start := time.Now()
		for range n {
			var th *fault.Throttled
			switch err := lm.Admit(ctx, owner, "free"); {
			case err == nil:
				served++
			case errors.As(err, &th):
				throttled++
			default:
				t.Fatal(err)
			}
			time.Sleep(every)
		}
		per := (units() - before) / float64(n)
		t.Logf("%s: %d requests in %v, %d served, %d throttled: %.3f write units a request (%.1f per 100)", name, n, time.Since(start).Round(time.Millisecond), served, throttled, per, per*100)
		return served, throttled
	}
	if served, _ := run("a burst of 50", "u-burst", 50, 0); served != 50 {
		t.Errorf("a burst of 50 on a bucket of 60: %d served", served)
	}
	if _, throttled := run("hammering", "u-burst", 400, 0); throttled == 0 {
		t.Error("400 requests at once past a burst: none throttled")
	}
	if served, _ := run("steady at 5 a second", "u-steady", 20, 200*time.Millisecond); served != 20 {
		t.Errorf("steady under the limit: %d of 20 served", served)
	}
	if u := counter.Units(); u["write"] == 0 {
		t.Errorf("no write units counted: %v", u)
	}
}

// TestInstancesOfTheLimiterShareOneBucket: four limiters on one table (as
// four instances of the api function), each hammered by two callers for
// two seconds with one owner's requests, serve no more than the bound of
// docs/limits.md together — Burst + Rate × (elapsed + LeaseFor) — and
// refuse the rest.
func TestInstancesOfTheLimiterShareOneBucket(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	st := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, nil)
	l := ratelimit.Limit{Rate: 20, Burst: 40}
	ctx := context.Background()
	var served, refused atomic.Int64
	start := time.Now()
	stop := start.Add(2 * time.Second)
	var wg sync.WaitGroup
	for range 4 {
		lm, err := ratelimit.New(ratelimit.Config{Store: st, PerPlan: map[string]ratelimit.Limit{"free": l}})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					var th *fault.Throttled
					switch err := lm.Admit(ctx, "u-instances", "free"); {
					case err == nil:
						served.Add(1)
					case errors.As(err, &th):
						refused.Add(1)
						time.Sleep(time.Millisecond)
					default:
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	bound := float64(l.Burst) + float64(l.Rate)*(elapsed+ratelimit.LeaseForDefault).Seconds()
	if float64(served.Load()) > bound {
		t.Errorf("%d served by four instances in %v, over the bound %.1f", served.Load(), elapsed, bound)
	}
	if served.Load() < int64(l.Burst) || refused.Load() == 0 {
		t.Errorf("%d served, %d refused in %v: want at least the burst served and the rest refused", served.Load(), refused.Load(), elapsed)
	}
	t.Logf("%d served, %d refused by four instances in %v (bound %.1f)", served.Load(), refused.Load(), elapsed, bound)
}
