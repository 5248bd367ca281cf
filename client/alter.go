package client

import (
	"context"
	"net/http"

	"github.com/stratadb/strata/api"
)

// Alter changes the table's columns in one commit, by metadata alone
// (add, rename, widen, drop: see api.SchemaChange), and returns the table
// as it is after. A change the table cannot take is a 400 naming it.
func (c *Client) Alter(ctx context.Context, name string, changes ...api.SchemaChange) (api.TableInfo, error) {
	var out api.TableInfo
	body, err := jsonBody(api.AlterRequest{Changes: changes})
	if err != nil {
		return out, err
	}
	return out, c.call(ctx, http.MethodPost, c.url(name, "/schema", nil), api.JSON, body, "").json(&out)
}
