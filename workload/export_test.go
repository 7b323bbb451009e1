package workload

// OutcomeOf exposes outcomeOf to the tests.
var OutcomeOf = outcomeOf
