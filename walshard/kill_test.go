package walshard_test

func registerKillChild() {}
