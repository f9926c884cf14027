package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/bolt"
	"github.com/scarproxy/scarproxy/store/postgres"
)

// incidentSpan is how far back the seeded incidents go. With 100k of them
// the newest 1,000 (what the guard reads per request) fall within the
// guard's default one-hour window.
const incidentSpan = 24 * time.Hour

// seedStore writes incidents and solutions into a new bbolt file at dst.
// Each bbolt write commits with fsync; to seed 100k records in seconds the
// file is written on a memory file system (/dev/shm) when there is one,
// then copied to dst.
func seedStore(ctx context.Context, dst string, incidents, solutions int, now time.Time, progress io.Writer) error {
	path := dst
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "scarbench-seed-*")
		if err == nil {
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "scarproxy.db")
		}
	}
	if path == dst {
		fmt.Fprintln(progress, "seeding on disk (no /dev/shm): each write is fsynced, this is slow")
	}
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	start := time.Now()
	for i := incidents - 1; i >= 0; i-- { // oldest first: appends to the B+tree
		inc := seedIncident(i, incidents, now, incidentSpan)
		if err := st.AddIncident(ctx, &inc); err != nil {
			st.Close()
			return fmt.Errorf("seed incident %d: %w", i, err)
		}
	}
	incTime := time.Since(start)
	start = time.Now()
	for i, s := range seedSolutions(solutions, now) {
		if err := st.PutSolution(ctx, &s); err != nil {
			st.Close()
			return fmt.Errorf("seed solution %d: %w", i, err)
		}
	}
	fmt.Fprintf(progress, "seeded %d incidents in %s and %d solutions in %s\n", incidents, incTime.Round(time.Millisecond), solutions, time.Since(start).Round(time.Millisecond))
	if err := st.Close(); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if path != dst {
		if err := copyFile(path, dst); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// seedBatch is how many seeded incidents go into one transaction.
const seedBatch = 1000

// seedPostgres writes incidents and solutions into the PostgreSQL store at
// dsn, whose schema should be empty.
func seedPostgres(ctx context.Context, dsn string, incidents, solutions int, now time.Time, progress io.Writer) error {
	st, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	defer st.Close()
	start := time.Now()
	var batch []store.IncidentWrite
	for i := incidents - 1; i >= 0; i-- { // oldest first
		inc := seedIncident(i, incidents, now, incidentSpan)
		batch = append(batch, store.IncidentWrite{Incident: &inc})
		if len(batch) == seedBatch || i == 0 {
			if _, err := st.AddIncidents(ctx, batch); err != nil {
				return fmt.Errorf("seed incidents: %w", err)
			}
			batch = batch[:0]
		}
	}
	incTime := time.Since(start)
	start = time.Now()
	for i, s := range seedSolutions(solutions, now) {
		if err := st.PutSolution(ctx, &s); err != nil {
			return fmt.Errorf("seed solution %d: %w", i, err)
		}
	}
	fmt.Fprintf(progress, "seeded %d incidents in %s and %d solutions in %s\n", incidents, incTime.Round(time.Millisecond), solutions, time.Since(start).Round(time.Millisecond))
	return nil
}

// openStore opens scarproxy's store after it stopped: its bbolt file, or
// the PostgreSQL DSN.
func (e *benchEnv) openStore(ctx context.Context, o options) (store.Store, error) {
	if o.postgres != "" {
		return postgres.Open(ctx, o.postgres, postgres.Options{})
	}
	return bolt.Open(e.dataFile, bolt.Options{})
}
