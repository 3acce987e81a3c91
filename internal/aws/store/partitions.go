package store

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// partitionReaders bounds how many of the sweep index's partitions a count
// reads at once: an overview reads a few hundred of them (every status,
// tier and shard), one Query each when they are empty.
const partitionReaders = 16

// errPartitionRead, returned by a page function, ends the reading of that
// page's partition, and only that: the others go on, and it is no error.
var errPartitionRead = errors.New("partition read enough")

// queryPartitions runs the Query that build makes for each partition key,
// every page of it (or until page returns errPartitionRead), at most
// partitionReaders partitions at once, and hands each page to page — one
// page at a time, so page may update the caller's totals without a lock of
// its own. It returns the first error.
func (s *Store) queryPartitions(ctx context.Context, pks []string, build func(pk string) (*dynamodb.QueryInput, error),
	page func(*dynamodb.QueryOutput) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
			cancel()
		}
		mu.Unlock()
	}
	sem := make(chan struct{}, partitionReaders)
	for _, pk := range pks {
		in, err := build(pk)
		if err != nil {
			fail(err)
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for {
				res, err := s.db.Query(ctx, in)
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				err = page(res)
				mu.Unlock()
				if errors.Is(err, errPartitionRead) {
					return
				}
				if err != nil {
					fail(err)
					return
				}
				if len(res.LastEvaluatedKey) == 0 {
					return
				}
				in.ExclusiveStartKey = res.LastEvaluatedKey
			}
		})
	}
	wg.Wait()
	return first
}
