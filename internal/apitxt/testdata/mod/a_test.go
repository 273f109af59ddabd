package root

func TestOnly() {}
