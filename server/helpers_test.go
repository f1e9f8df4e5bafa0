package server_test

import (
	"errors"
	"sync"
)

type lockedMu = sync.Mutex

func errorsAs(err error, target any) bool { return errors.As(err, target) }
