package server_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/server"
)

// A table created over HTTP with a timestamp in a time zone Arrow cannot
// resolve would print every value as "...": the create is refused, naming
// the column and the zone, and no table is left behind.
func TestCreateRefusesAnUnknownTimeZone(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	mars := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Mars/Olympus"}}}, nil)
	_, err := f.c.CreateTable(ctx, "mars", mars)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != api.CodeUnsupportedSchema ||
		!strings.Contains(ae.Message, `field "at"`) || !strings.Contains(ae.Message, `"Mars/Olympus"`) {
		t.Fatalf("create in Mars/Olympus: %v", err)
	}
	if _, err := f.c.Describe(ctx, "mars"); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("the refused create left a table: %v", err)
	}
	paris := arrow.NewSchema([]arrow.Field{{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"}}}, nil)
	if _, err := f.c.CreateTable(ctx, "paris", paris); err != nil {
		t.Fatalf("create in Europe/Paris: %v", err)
	}
}
