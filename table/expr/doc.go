// Package expr is Strata's filter language: predicates (Eq, Lt, In,
// And, Not, IsNull, Like, arithmetic, ...), their SQL-like text
// (ParseFilter, and Predicate.String back), column lists (ParseColumns)
// and the assignments of an update (ParseAssignments).
//
// Invariants:
//
//   - A predicate is bound to a schema (Bind) before it is evaluated; a
//     missing column or a comparison of mismatched types is ErrBadPredicate,
//     naming the column, never a filter that silently matches nothing.
//   - Pruning is sound: MayMatch answers false for a fragment's or row
//     group's statistics only when no row there can match, and AllMatch
//     true only when every row does, so a scan that skips by statistics
//     returns the rows an unpruned scan returns.
//   - A parsed filter prints (Predicate.String) as text that parses to a
//     filter selecting the same rows.
package expr
