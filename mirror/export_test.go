package mirror

// InventoryFrom lets tests take a target's inventory however few versions
// they copy.
var InventoryFrom = &inventoryFrom

// WantErr fails unless err holds every part of want.
var WantErr = wantErr
