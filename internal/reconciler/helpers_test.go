package reconciler_test

import (
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func itoa(n int) string { return strconv.Itoa(n) }

const time10s = 10 * time.Second
