package server_test

import "sync"

type lockedMu = sync.Mutex
