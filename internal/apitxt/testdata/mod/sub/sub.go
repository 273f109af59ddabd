package sub

type Generic[T any] struct{ V T }

func (g Generic[T]) Get() T { return g.V }
