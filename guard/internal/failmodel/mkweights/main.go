// Command mkweights trains the failure model on the parts of
// guard/testdata named in failmodel.TrainingParts and writes its weights
// to weights.bin, in the directory it runs in (go generate runs it in
// guard/internal/failmodel).
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/scarproxy/scarproxy/guard/internal/failmodel"
)

func main() {
	log.SetFlags(0)
	examples, err := failmodel.ReadParts(filepath.Join("..", "..", "testdata"), failmodel.TrainingParts)
	if err != nil {
		log.Fatal(err)
	}
	m := failmodel.Quantize(failmodel.Train(examples))
	if err := os.WriteFile("weights.bin", m.Encode(), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("weights.bin: %d examples of %d parts, scale %g\n", len(examples), len(failmodel.TrainingParts), m.Scale)
}
