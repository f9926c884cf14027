package guard

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// eachInParallel calls fn(0) to fn(n-1) on as many goroutines as there
// are Ps: the checks over every line of every corpus are independent.
func eachInParallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
}
