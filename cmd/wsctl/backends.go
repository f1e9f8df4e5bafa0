package main

// The backends wsctl links. Each registers its DSN schemes in init.
// backend/json and backend/postgres join when they land on main.
import (
	_ "github.com/agentspace/agentspace/backend/sqlite"
)
