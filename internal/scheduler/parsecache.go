package scheduler

import "sync"

// Parsing a schedule builds its tables (a day's minutes, a year of month
// days: about 10k entries), and every pass of a cron Task and every metrics
// scrape needs the Task's schedule. A Schedule is immutable, so the parsed
// ones are kept by (expression, zone) and shared. Bounded: when it holds
// maxCached, it starts over (a cluster has few distinct schedules).

const maxCached = 4096

var cache struct {
	sync.Mutex
	m map[[2]string]*Schedule
}

// ParseCached is Parse, remembering what parsed (errors are not kept: they
// are rare, and their message must come from Parse).
func ParseCached(schedule, timeZone string) (*Schedule, error) {
	key := [2]string{schedule, timeZone}
	cache.Lock()
	s, ok := cache.m[key]
	cache.Unlock()
	if ok {
		return s, nil
	}
	s, err := Parse(schedule, timeZone)
	if err != nil {
		return nil, err
	}
	cache.Lock()
	if cache.m == nil || len(cache.m) >= maxCached {
		cache.m = map[[2]string]*Schedule{}
	}
	cache.m[key] = s
	cache.Unlock()
	return s, nil
}
