package main

// The backends wsctl links. Each registers its DSN schemes in init.
import (
	_ "github.com/agentspace/agentspace/backend/json"
	_ "github.com/agentspace/agentspace/backend/postgres"
	_ "github.com/agentspace/agentspace/backend/remote"
	_ "github.com/agentspace/agentspace/backend/sqlite"
)
