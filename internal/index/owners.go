package index

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// JobOwners reads the Jobs one Task controls. A pass reads them first,
// so the read must cost what the Task has, not what its namespace has.
type JobOwners interface {
	OwnedBy(ctx context.Context, ns, uid string) ([]batchv1.Job, error)
}

// ownerBucketIndex is the Job informer's own index (AddOwners): Jobs by
// namespace and OwnerBucket of their controlling Task's UID.
const ownerBucketIndex = "taskops.io/namespace-owner-bucket"

// AddOwners registers the Jobs' owner index on c's Job informer and
// returns the reader of it; call it before the cache starts.
//
// The reader takes the bucket's Jobs from the informer's indexer as the
// pointers it holds and copies only the Task's own. A List through the
// cache, even without its deep copy, copies every Job of the bucket into
// the list's items (a Job's struct is over a KiB): with a thousand Jobs in
// a namespace that was four Jobs copied per pass for the one it wanted,
// and forty with ten thousand, the only part of a pass growing with the
// cluster (docs/performance-history.md, "Lazy loggers and the Jobs read in
// place"). The index keys the namespace with the
// bucket, once per Job (a field index keeps a cluster-wide key too).
//
// A cache limited to some namespaces (--namespaces) has an informer per
// namespace and none whose indexer can be read: there the Jobs are
// listed through the field index OwnedJobs instead (ListOwners).
func AddOwners(ctx context.Context, c cache.Cache) (JobOwners, error) {
	inf, err := c.GetInformer(ctx, &batchv1.Job{})
	if err != nil {
		return nil, fmt.Errorf("the Job informer: %w", err)
	}
	src, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		if err := c.IndexField(ctx, &batchv1.Job{}, OwnedJobs, JobOwnerBucket); err != nil {
			return nil, err
		}
		return ListOwners{Reader: c}, nil
	}
	if err := inf.AddIndexers(toolscache.Indexers{ownerBucketIndex: namespaceOwnerBucket}); err != nil {
		return nil, err
	}
	return indexedOwners{indexer: src.GetIndexer()}, nil
}

// namespaceOwnerBucket is the index function of ownerBucketIndex.
func namespaceOwnerBucket(obj any) ([]string, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, nil
	}
	if uid, ok := controllerUID(job); ok {
		return []string{job.Namespace + "/" + OwnerBucket(uid)}, nil
	}
	return nil, nil
}

// indexedOwners reads the informer's indexer (AddOwners).
type indexedOwners struct{ indexer toolscache.Indexer }

func (o indexedOwners) OwnedBy(_ context.Context, ns, uid string) ([]batchv1.Job, error) {
	objs, err := o.indexer.ByIndex(ownerBucketIndex, ns+"/"+OwnerBucket(uid))
	if err != nil {
		return nil, err
	}
	var out []batchv1.Job
	for _, obj := range objs {
		if job, ok := obj.(*batchv1.Job); ok {
			out = ownJobs(out, uid, job)
		}
	}
	return out, nil
}

// ListOwners lists a Task's Jobs through Reader by the field index
// OwnedJobs (registered by AddOwners when the informer's indexer cannot be
// read, and by the tests' fake clients).
type ListOwners struct{ Reader client.Reader }

func (o ListOwners) OwnedBy(ctx context.Context, ns, uid string) ([]batchv1.Job, error) {
	return OwnedBy(ctx, o.Reader, ns, uid)
}
