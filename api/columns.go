package api

import (
	"strings"
	"unicode"
)

// ColumnList writes names as the columns= query parameter (and the CLI's
// --columns) reads them: separated by commas, each a plain word (letters,
// digits and '_', not starting with a digit) as it is, any other name
// between backticks with each backtick in it doubled. Joined without the
// quotes, a name holding a comma would read as two columns, and one with a
// leading space or backtick as another name.
func ColumnList(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = quoteColumn(n)
	}
	return strings.Join(quoted, ",")
}

func quoteColumn(name string) string {
	plain := name != "" && !isKeyword(name)
	for i, r := range name {
		plain = plain && (r == '_' || unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r))
	}
	if plain {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// isKeyword: a filter's keywords are written between backticks as column
// names (as expr.QuoteColumn writes them).
func isKeyword(w string) bool {
	for _, k := range []string{"AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "BETWEEN", "TRUE", "FALSE"} {
		if strings.EqualFold(k, w) {
			return true
		}
	}
	return false
}
