package pgtest

import (
	"context"
	"fmt"
	"time"

	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// containerImage is the PostgreSQL image started where Docker runs and no server was found.
const containerImage = "postgres:16-alpine"

// startContainer starts a throwaway PostgreSQL in Docker and returns its
// DSN. testcontainers' reaper removes it when the test process exits.
func startContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := tcpostgres.Run(ctx, containerImage,
		tcpostgres.WithDatabase("test"), tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		return "", fmt.Errorf("testcontainers: %w", err)
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}
