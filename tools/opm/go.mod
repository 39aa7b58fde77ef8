module github.com/berth-registry/berth/tools/opm

go 1.26.8

require github.com/operator-framework/operator-registry v1.69.0
