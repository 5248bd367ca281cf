//go:build strata_plant

package sim

import (
	"context"
	"testing"

	"github.com/stratadb/strata/internal/plant"
)

// Planted defects (a build with -tags strata_plant): each breaks the engine
// in one place, and the campaign must find it within its seed budget.
func TestPlantedDefectsAreFound(t *testing.T) {
	for _, d := range plant.All {
		t.Run(d, func(t *testing.T) {
			plant.Set(d, true)
			defer plant.Set(d, false)
			c, err := Campaign(context.Background(), CampaignConfig{Start: *start, Seeds: *seeds, Steps: *steps})
			if err != nil {
				t.Fatal(err)
			}
			if c.Failed == nil {
				t.Fatalf("%d seeds from %d found nothing", c.Seeds, *start)
			}
			t.Logf("found by seed %d after %d seeds and %d operations: %s: %s", c.Failed.Seed, c.Seeds, c.Operations, c.Failed.Oracle, c.Failed.Detail)
		})
	}
}
