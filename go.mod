module github.com/conveyor/conveyor

go 1.26
